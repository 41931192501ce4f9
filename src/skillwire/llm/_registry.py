"""Which adapter serves a providerConfig: a registry keyed by its ``vendor``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from skillwire.llm._adapter import Adapter, check_no_credentials
from skillwire.llm._errors import ProviderConfigError
from skillwire.llm._ollama import OllamaAdapter
from skillwire.llm._openai import OpenAIAdapter

__all__ = ["AdapterFactory", "AdapterRegistry", "adapter_for", "default_registry", "register_adapter"]

#: Builds an adapter from a providerConfig and the keyword options given to ``adapter_for`` (an
#: :class:`Adapter` subclass is one).
AdapterFactory = Callable[..., Adapter]


class AdapterRegistry:
    """The adapters by vendor. :data:`default_registry` holds the built-in ones (``openai``, ``ollama``);
    :func:`register_adapter` and :func:`adapter_for` are its methods. Give a component its own registry
    (``default_registry.copy()``) to keep its adapters to itself."""

    def __init__(self, factories: Mapping[str, AdapterFactory] | None = None) -> None:
        self._factories: dict[str, AdapterFactory] = {}
        for vendor, factory in (factories or {}).items():
            self.register(vendor, factory)

    def register(self, vendor: str, factory: AdapterFactory, *, replace: bool = False) -> None:
        """Serve ``providerConfig: {vendor: <vendor>, ...}`` with ``factory`` (vendor names ignore case); a
        vendor already registered is a ValueError unless ``replace``."""
        key = vendor.strip().lower()
        if not key:
            raise ValueError("a vendor name is needed")
        if key in self._factories and not replace:
            raise ValueError(
                f"an adapter is already registered for vendor {key!r} (replace=True replaces it)"
            )
        self._factories[key] = factory

    def unregister(self, vendor: str) -> None:
        """Forget ``vendor``'s adapter (a KeyError if none is registered)."""
        del self._factories[vendor.strip().lower()]

    def vendors(self) -> list[str]:
        """The vendors served, sorted."""
        return sorted(self._factories)

    def copy(self) -> AdapterRegistry:
        return AdapterRegistry(self._factories)

    def adapter_for(self, provider_config: Mapping[str, Any], **options: Any) -> Adapter:
        """The adapter for ``provider_config``: its ``vendor``'s factory called with it and ``options``
        (``env=``, ``max_reply_bytes=``, ``default_timeout=`` for the built-in ones). A providerConfig with a
        credential in it, no vendor or an unknown one raises :class:`ProviderConfigError`."""
        if not isinstance(provider_config, Mapping):
            raise ProviderConfigError("providerConfig: expected a mapping", key="")
        check_no_credentials(provider_config)
        vendor = provider_config.get("vendor")
        if not isinstance(vendor, str) or not vendor.strip():
            raise ProviderConfigError("providerConfig.vendor: expected the name of a vendor", key="vendor")
        factory = self._factories.get(vendor.strip().lower())
        if factory is None:
            known = ", ".join(self.vendors()) or "none"
            raise ProviderConfigError(
                f"providerConfig.vendor: no adapter for vendor {vendor!r} (registered: {known})",
                key="vendor",
                vendor=vendor,
            )
        return factory(provider_config, **options)


#: The registry :func:`adapter_for` and :func:`register_adapter` use.
default_registry = AdapterRegistry({"ollama": OllamaAdapter, "openai": OpenAIAdapter})
register_adapter = default_registry.register
adapter_for = default_registry.adapter_for
