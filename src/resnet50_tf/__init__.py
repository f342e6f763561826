"""ResNet-50 in TensorFlow/Keras (the CARAML vision benchmark); see
``__main__``; ``cluster`` builds TF_CONFIG from the launch env."""
