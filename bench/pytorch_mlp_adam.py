"""PyTorch alone on config/local.json's run, for scripts/bench-async-workers.sh:
the MLP 784-256-128-10 (ReLU, He-normal weights, zero biases), Adam,
batches of --batch (128 there) in a fresh order each epoch, every sample
once per epoch, the test set scored after the last epoch. Prints one JSON
line: test accuracy, and training samples/s (scoring excluded)."""
import os
import sys

import pin_threads  # noqa: F401  (before torch)
import reference_training  # noqa: E402
from torch import nn  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples",
                                "pytorch_cnn"))
from fashion_cnn import load, score  # noqa: E402


def make_model():
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(),
                          nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            nn.init.zeros_(m.bias)
    return model


def main():
    a = reference_training.option_parser(epochs=4).parse_args()
    reference_training.set_up_torch(a)
    x, y = load("train")
    test_x, test_y = load("t10k")
    model = make_model()
    seconds = reference_training.train(model, nn.functional.cross_entropy,
                                       x, y, a)
    accuracy, loss = score(model, test_x, test_y)
    reference_training.print_result(a, len(x), seconds,
                                    test_accuracy=round(accuracy, 4),
                                    test_loss=round(loss, 4))


if __name__ == "__main__":
    main()
