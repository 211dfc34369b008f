"""Models: load pretrained ones, build random-init and Gaussian null models, train checkpoints locally."""
