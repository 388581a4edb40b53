"""Every input a user gives, read the way the tool it came from reads it: preset names, the YAML 1.2
loader, Hugging Face config.json, Megatron-LM arguments, NeMo recipes. ``load`` is the one way in.
"""

from perfmodel.inputs.load import Loaded, load, load_plan

__all__ = ["Loaded", "load", "load_plan"]
