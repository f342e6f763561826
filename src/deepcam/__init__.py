"""DeepCAM (MLPerf HPC): climate-pattern segmentation (background, tropical
cyclones, atmospheric rivers) of 16-channel CAM5 fields with DeepLabV3+,
the network from segmentation-models-pytorch."""
