"""Model definitions with torchvision's layouts and ``state_dict`` keys.

    from tracegrad.models import resnet18
    model = resnet18(num_classes=10)

Pretrained weights are not downloaded: ``weights`` must be None (load a torchvision
checkpoint's arrays with ``load_state_dict`` instead).
"""
from .resnet import BasicBlock, Bottleneck, ResNet, resnet18, resnet34, resnet50

__all__ = ["ResNet", "BasicBlock", "Bottleneck", "resnet18", "resnet34", "resnet50"]
