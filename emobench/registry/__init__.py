"""The scenario and persona library: typed cards, validation, content hashes and splits."""

from emobench.registry.loader import Registry, load_registry
from emobench.registry.models import Case, IEDRLevels, Persona, Scenario

__all__ = ["Case", "IEDRLevels", "Persona", "Registry", "Scenario", "load_registry"]
