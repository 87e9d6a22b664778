"""Import cost: the provider layer loads httpx only when a request is made."""

from __future__ import annotations

import subprocess
import sys


def test_importing_lovia_and_the_adapters_does_not_load_httpx() -> None:
    code = (
        "import sys, lovia, lovia.providers, lovia.providers.base, lovia.providers.registry\n"
        "from lovia.providers import OpenAIChatProvider, AnthropicProvider, provider_from_string\n"
        "import lovia.http_config\n"
        "p = provider_from_string('openai:m', base_url='http://127.0.0.1:9/v1')\n"
        "assert 'httpx' not in sys.modules, 'httpx loaded'\n"
        "p._http()\n"
        "assert 'httpx' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_providers_package_exports_resolve() -> None:
    import lovia.providers as providers

    for name in providers.__all__:
        assert getattr(providers, name).__name__ == name
