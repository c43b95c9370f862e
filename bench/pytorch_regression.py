"""PyTorch side of scripts/bench-regression.sh: the same model (one dense
layer from the features to the targets, no activation) trained on the same
.npy files as troupe-train trains it: Glorot-uniform weights and zero
biases, Adam, mean squared error averaged over every target of the batch,
batches of 64 in a fresh order each epoch, every sample once per epoch
(the last batch short), the test set scored after the last epoch. Prints
one JSON line: test mse and training samples/s (scoring excluded)."""
import os

import pin_threads  # noqa: F401  (before torch)
import numpy as np  # noqa: E402
import reference_training  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402


def main():
    p = reference_training.option_parser(epochs=5)
    p.add_argument("--dir", required=True)
    a = p.parse_args()
    reference_training.set_up_torch(a)

    def load(name):
        return torch.from_numpy(np.load(os.path.join(a.dir, name)))

    x, y = load("x_train.npy"), load("y_train.npy")
    test_x, test_y = load("x_test.npy"), load("y_test.npy")
    model = nn.Linear(x.shape[1], y.shape[1])
    nn.init.xavier_uniform_(model.weight)
    nn.init.zeros_(model.bias)
    seconds = reference_training.train(model, nn.functional.mse_loss,
                                       x, y, a)
    with torch.no_grad():
        mse = nn.functional.mse_loss(model(test_x), test_y).item()
    reference_training.print_result(a, len(x), seconds, test_mse=mse)


if __name__ == "__main__":
    main()
