"""DeepCAM (MLPerf HPC): climate-pattern segmentation (background, tropical
cyclones, atmospheric rivers) of 16-channel CAM5 fields with the MLPerf HPC
reference's DeepLabv3+ (:mod:`deepcam.model`)."""
