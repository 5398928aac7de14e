"""The learned half: the paper's figures, retrieval and its ceiling, the training objectives, the Gaussian theory,
the `learned` preset, training speed, and the simulator that makes the training pairs."""
