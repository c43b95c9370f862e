"""PyTorch side of scripts/bench-layers.sh: the layer-list CNN of that
script in PyTorch, trained on Fashion-MNIST as troupe-train trains it:
He-normal weights and zero biases, Adam, batches of 64 in a fresh order
each epoch, every sample once per epoch (the last batch short), the test
set scored after the last epoch. Layer normalization is over each
position's channels, as troupe's (and Keras') layernorm. Prints one JSON
line: test accuracy and loss, and training samples/s (scoring excluded)."""
import os
import sys

import pin_threads  # noqa: F401  (before torch)
import reference_training  # noqa: E402
from torch import nn  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples",
                                "pytorch_cnn"))
from fashion_cnn import load, score  # noqa: E402


class ChannelNorm(nn.Module):
    """nn.LayerNorm over the channels of NCHW activations."""

    def __init__(self, channels):
        super().__init__()
        self.norm = nn.LayerNorm(channels, eps=1e-5)

    def forward(self, x):
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def make_model():
    # troupe: conv2d 32 k3 s2 same relu, layernorm, conv2d 64 k3 s2 same
    # relu, layernorm, flatten, dropout 0.25, dense 128 relu, dropout 0.25,
    # dense 10.
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, stride=2, padding=1), nn.ReLU(), ChannelNorm(32),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(), ChannelNorm(64),
        nn.Flatten(), nn.Dropout(0.25), nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
        nn.Dropout(0.25), nn.Linear(128, 10))
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            nn.init.zeros_(m.bias)
    return model


def train_on_fashion_mnist(make, epochs):
    """The reference's run: the options (--epochs defaults to `epochs`),
    the model `make()` trained on Fashion-MNIST with cross-entropy, the
    test set scored, the JSON line printed (bench/pytorch_mlp_adam.py
    runs its MLP through it too)."""
    a = reference_training.option_parser(epochs=epochs).parse_args()
    reference_training.set_up_torch(a)
    x, y = load("train")
    test_x, test_y = load("t10k")
    model = make()
    seconds = reference_training.train(model, nn.functional.cross_entropy,
                                       x, y, a)
    accuracy, loss = score(model, test_x, test_y)
    reference_training.print_result(a, len(x), seconds,
                                    test_accuracy=round(accuracy, 4),
                                    test_loss=round(loss, 4))


if __name__ == "__main__":
    train_on_fashion_mnist(make_model, epochs=3)
