"""PyTorch alone on config/local.json's run, for scripts/bench-async-workers.sh:
the MLP 784-256-128-10 (ReLU, He-normal weights, zero biases), Adam,
batches of --batch (128 there) in a fresh order each epoch, every sample
once per epoch, the test set scored after the last epoch. Prints one JSON
line: test accuracy, and training samples/s (scoring excluded)."""
import pin_threads  # noqa: F401  (before torch)
from pytorch_layers import train_on_fashion_mnist  # noqa: E402
from torch import nn  # noqa: E402


def make_model():
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(),
                          nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            nn.init.zeros_(m.bias)
    return model


if __name__ == "__main__":
    train_on_fashion_mnist(make_model, epochs=4)
