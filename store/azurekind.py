"""Stores on Azure Blob Storage and Data Lake Storage Gen2, and on emulators of it.

A store is named ``az://CONTAINER/PREFIX`` (``azure://`` is the same), its account given by
``AZURE_STORAGE_ACCOUNT_NAME``, or ``abfs[s]://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX``.
Credentials come from the standard environment (``AZURE_STORAGE_ACCOUNT_NAME``,
``AZURE_STORAGE_ACCOUNT_KEY``, ``AZURE_STORAGE_SAS_TOKEN``; a service principal's
``AZURE_CLIENT_ID``, ``AZURE_CLIENT_SECRET``, ``AZURE_TENANT_ID``) and from storage options with
delta-rs's names (upper case here; an explicit option wins). Without any, Azure's default
credential chain is tried (a managed identity, the Azure CLI's login).
``AZURE_STORAGE_ENDPOINT`` points at another endpoint (``https://ACCOUNT.blob.core.windows.net``,
or ``http://HOST:PORT/ACCOUNT`` with the account in the path);
``AZURE_STORAGE_USE_EMULATOR=true`` means the Azure Storage emulator: its well-known account
and key, at ``AZURITE_BLOB_STORAGE_URL`` (default ``http://127.0.0.1:10000``), the variable
delta-rs reads for it too.

Azure writes a blob only if it does not exist when asked to, so delta-rs commits there are
atomic without a locking provider: of two commits of one version, exactly one succeeds. One of
the kinds of :mod:`.location`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

import pyarrow.fs as pafs

from replaydb.errors import StoreError, UsageError

EMULATOR_ACCOUNT = "devstoreaccount1"
"""The account every Azure Storage emulator serves."""
EMULATOR_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
                "KBHBeksoGMGw==")
"""The emulator account's published key (the emulator's documented default, no secret)."""

_ENV_KEYS = {
    "AZURE_STORAGE_ACCOUNT_NAME": "AZURE_STORAGE_ACCOUNT_NAME",
    "AZURE_STORAGE_ACCOUNT": "AZURE_STORAGE_ACCOUNT_NAME",
    "AZURE_STORAGE_ACCOUNT_KEY": "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_KEY": "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_TOKEN": "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_ENDPOINT": "AZURE_STORAGE_ENDPOINT",
    "AZURE_STORAGE_USE_EMULATOR": "AZURE_STORAGE_USE_EMULATOR",
    "AZURE_ALLOW_HTTP": "AZURE_ALLOW_HTTP",
    "AZURE_CLIENT_ID": "AZURE_STORAGE_CLIENT_ID",
    "AZURE_CLIENT_SECRET": "AZURE_STORAGE_CLIENT_SECRET",
    "AZURE_TENANT_ID": "AZURE_STORAGE_TENANT_ID",
}
"""Environment variables read for an Azure store, and the storage option each stands for."""

_KNOWN_OPTIONS = frozenset(_ENV_KEYS.values()) | {"AZURE_STORAGE_ACCESS_KEY",
                                                  "AZURE_STORAGE_SAS_KEY"}
"""Storage option keys accepted for an Azure store (delta-rs's names, upper case)."""

_ALIASES = {"AZURE_STORAGE_ACCESS_KEY": "AZURE_STORAGE_ACCOUNT_KEY",
            "AZURE_STORAGE_SAS_KEY": "AZURE_STORAGE_SAS_TOKEN"}

_KEYS_HINT = ("set AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_TOKEN (environment or "
              "--storage-option)")


def emulator_url(account: str = EMULATOR_ACCOUNT) -> str:
    """The emulator's blob endpoint: ``AZURITE_BLOB_STORAGE_URL`` (the variable delta-rs reads
    for it too), by default ``http://127.0.0.1:10000``, with the account in the path."""
    base = os.environ.get("AZURITE_BLOB_STORAGE_URL", "http://127.0.0.1:10000").rstrip("/")
    return f"{base}/{account}"


class AzureKind:
    """Azure Blob Storage (see the module docstring)."""

    name = "Azure"
    schemes = ("az", "azure", "abfs", "abfss")
    container_word = "container"
    usage = "az://CONTAINER[/PREFIX] or abfss://CONTAINER@ACCOUNT.dfs.core.windows.net[/PREFIX]"
    no_credentials = ("no credentials", _KEYS_HINT)
    failures = (
        (("ContainerNotFound", "container does not exist"), "the container does not exist",
         "check the container name in the URI"),
        (("AuthenticationFailed", "failed to authenticate"), "the credentials were refused",
         _KEYS_HINT),
        (("AuthorizationFailure", "AuthorizationPermissionMismatch", "not authorized",
          "403"), "permission denied",
         "the credentials are not valid there or may not read or write this prefix"),
        (("Connection refused", "Couldn't connect", "Could not connect", "curl", "Timeout",
          "timed out", "resolve host", "error sending request"),
         "the object store cannot be reached",
         "check AZURE_STORAGE_ENDPOINT (environment or --storage-option; for the emulator "
         "AZURITE_BLOB_STORAGE_URL) and the network"),
        (("credential", "Credential"), "no credentials", _KEYS_HINT),
    )
    fallback_hint = "check the URI, AZURE_STORAGE_ENDPOINT and the credentials"

    def parse(self, uri: str) -> tuple[str, str]:
        """``(container, prefix)`` of an Azure URI (the account, when the URI names it, is
        read by :meth:`options`)."""
        parsed = urlparse(uri)
        container = parsed.netloc.split("@", 1)[0]
        if not container:
            raise UsageError(f"{uri}: expected {self.usage}")
        return container, parsed.path.strip("/")

    def options(self, options: Mapping[str, str], uri: str) -> dict[str, str]:
        """The storage options: the environment's standard variables, overridden by
        ``options`` (keys upper-cased, aliases to delta-rs's main names; an unknown key is a
        UsageError naming the known ones); the emulator flag spelled out as its account, key
        and endpoint; the account from the URI where it names one."""
        out = {opt: os.environ[env] for env, opt in _ENV_KEYS.items() if os.environ.get(env)}
        for key, value in options.items():
            k = key.upper()
            if k not in _KNOWN_OPTIONS:
                raise UsageError(f"{uri}: unknown storage option {key!r}",
                                 hint="known: " + ", ".join(sorted(_KNOWN_OPTIONS)))
            out[_ALIASES.get(k, k)] = str(value)
        if out.get("AZURE_STORAGE_USE_EMULATOR", "false").lower() in ("1", "true", "yes"):
            out["AZURE_STORAGE_USE_EMULATOR"] = "true"
            out.setdefault("AZURE_STORAGE_ACCOUNT_NAME", EMULATOR_ACCOUNT)
            if "AZURE_STORAGE_SAS_TOKEN" not in out:
                out.setdefault("AZURE_STORAGE_ACCOUNT_KEY", EMULATOR_KEY)
        else:
            out.pop("AZURE_STORAGE_USE_EMULATOR", None)
        host = urlparse(uri).netloc.partition("@")[2]
        if host:
            out["AZURE_STORAGE_ACCOUNT_NAME"] = host.split(".", 1)[0]
        if not out.get("AZURE_STORAGE_ACCOUNT_NAME"):
            raise UsageError(f"{uri}: no storage account",
                             hint="set AZURE_STORAGE_ACCOUNT_NAME (environment or "
                                  "--storage-option), or name it in the URI (abfss://"
                                  "CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX)")
        if out.get("AZURE_STORAGE_ENDPOINT", "").startswith("http://"):
            out.setdefault("AZURE_ALLOW_HTTP", "true")
        return out

    def has_credentials(self, opts: Mapping[str, str]) -> bool:
        """Whether a key, a SAS token or a service principal was configured."""
        return any(k in opts for k in ("AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_SAS_TOKEN",
                                       "AZURE_STORAGE_CLIENT_SECRET"))

    def filesystem(self, opts: Mapping[str, str], uri: str) -> pafs.FileSystem:
        """Arrow's Azure file system for delta-rs-style options (``uri``: the store's, for
        errors)."""
        account = opts["AZURE_STORAGE_ACCOUNT_NAME"]
        kwargs: dict[str, Any] = {}
        if "AZURE_STORAGE_SAS_TOKEN" in opts:
            kwargs["sas_token"] = opts["AZURE_STORAGE_SAS_TOKEN"]
        elif "AZURE_STORAGE_ACCOUNT_KEY" in opts:
            kwargs["account_key"] = opts["AZURE_STORAGE_ACCOUNT_KEY"]
        elif "AZURE_STORAGE_CLIENT_ID" in opts:  # a service principal, or a managed identity
            kwargs["client_id"] = opts["AZURE_STORAGE_CLIENT_ID"]
            for opt, arg in (("AZURE_STORAGE_CLIENT_SECRET", "client_secret"),
                             ("AZURE_STORAGE_TENANT_ID", "tenant_id")):
                if opt in opts:
                    kwargs[arg] = opts[opt]
        endpoint = opts.get("AZURE_STORAGE_ENDPOINT")
        if opts.get("AZURE_STORAGE_USE_EMULATOR") == "true":
            endpoint = emulator_url(account)
        if endpoint:
            parsed = urlparse(endpoint)
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                raise UsageError(f"{uri}: AZURE_STORAGE_ENDPOINT {endpoint!r}: expected "
                                 "http(s)://HOST[:PORT][/ACCOUNT]")
            host = parsed.netloc
            # https://ACCOUNT.blob...: the account in the host name; else in the path
            authority = host[len(account):] if host.startswith(account + ".") else host
            kwargs.update(blob_storage_authority=authority, dfs_storage_authority=authority,
                          blob_storage_scheme=parsed.scheme, dfs_storage_scheme=parsed.scheme)
            if parsed.scheme == "http" and not kwargs.get("account_key") \
                    and not kwargs.get("sas_token"):
                # Azure's token credentials refuse plain http (and abort the process)
                raise StoreError(f"{uri}: no credentials (the endpoint {endpoint} is plain "
                                 "http, where Azure's token credentials are refused)",
                                 hint=_KEYS_HINT)
        return pafs.AzureFileSystem(account, **kwargs)

    def write_options(self, opts: Mapping[str, str]) -> dict[str, str]:
        """The storage options delta-rs commits with: the store's (Azure's conditional
        creates make a commit atomic as they are)."""
        return dict(opts)
