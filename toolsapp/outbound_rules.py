"""The host operator's rules for outgoing requests, as plain data: which non-public addresses may
be reached (OUTBOUND_ALLOWLIST) and which hosts may receive each secret (TOOL_SECRET_HOSTS,
LLM_API_KEY_HOSTS).

No Django here: agentsite/settings.py checks the settings with these functions when it loads, so
a malformed entry stops every process at start instead of being silently ignored.
"""
import ipaddress
import re

_HOST_NAME = re.compile(r"^(?=.{1,253}\.?$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$")
SECRET_ENV_PREFIX = "TOOL_SECRET_"

# IPv6 prefixes that carry an IPv4 address in their last 32 bits (RFC 6052 NAT64, RFC 4291 IPv4-compatible).
NAT64 = ipaddress.ip_network("64:ff9b::/96")
NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: local translators, never public
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def embedded_ipv4(ip) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address leads to (mapped, 6to4, Teredo's server and client, NAT64,
    IPv4-compatible); [] for any other address. A request to the IPv6 form reaches the IPv4 one."""
    if ip.version != 6:
        return []
    if ip.ipv4_mapped is not None:
        return [ip.ipv4_mapped]
    if ip.sixtofour is not None:
        return [ip.sixtofour]
    if ip.teredo is not None:
        return list(ip.teredo)  # the client's address comes back un-obfuscated
    if ip in NAT64 or ip in IPV4_COMPATIBLE:
        return [ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)]
    return []


def _entry_error(entry: str) -> str | None:
    if "/" in entry:
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError as exc:
            return f"{entry!r} is not a network ({exc})"
        return None
    if entry.startswith("[") and "]" not in entry:
        return f"{entry!r} opens a [ it does not close"
    name, port = split_host_port(entry)
    if port is not None and not (port.isdigit() and 1 <= int(port) <= 65535):
        return f"{entry!r} has no valid port (1-65535)"
    try:
        ipaddress.ip_address(name)
        return None
    except ValueError:
        pass
    if not _HOST_NAME.match(name):
        return f"{entry!r} is not a host name, an IP address, host:port or a network"
    return None


def split_host_port(entry: str) -> tuple[str, str | None]:
    """("host", "port" or None) of an allowlist entry: "host", "host:port", "::1", "[::1]:9000"."""
    entry = entry.strip().lower()
    if entry.startswith("["):
        name, _, rest = entry[1:].partition("]")
        return name, (rest[1:] if rest.startswith(":") else ("" if rest else None))
    if entry.count(":") == 1:
        name, port = entry.split(":")
        return name, port
    return entry, None


def allowlist_errors(entries: list[str]) -> list[str]:
    """What is wrong with OUTBOUND_ALLOWLIST entries, one message per bad entry."""
    return [error for error in (_entry_error(entry.strip().lower()) for entry in entries) if error]


def host_matches(host: str, patterns: list[str]) -> bool:
    """Whether `host` is one of `patterns`: an exact name or IP, or "*.example.org" for any name
    under example.org (not example.org itself). Case and a trailing dot do not matter."""
    host = host.lower().rstrip(".")
    for pattern in patterns:
        pattern = pattern.strip().lower().rstrip(".")
        if pattern.startswith("*."):
            if host.endswith(pattern[1:]) and len(host) > len(pattern) - 1:
                return True
        elif pattern and host == pattern.strip("[]"):
            return True
    return False


def secret_hosts_errors(value) -> list[str]:
    """What is wrong with TOOL_SECRET_HOSTS: {"TOOL_SECRET_X": ["api.example.com", "*.example.org"]}."""
    if not isinstance(value, dict):
        return ["it must be a JSON object mapping each TOOL_SECRET_* variable to a list of hosts"]
    errors = []
    for name, hosts in value.items():
        if not isinstance(name, str) or not name.startswith(SECRET_ENV_PREFIX):
            errors.append(f"{name!r} does not start with {SECRET_ENV_PREFIX}")
        elif not isinstance(hosts, list) or not all(isinstance(h, str) and h.strip() for h in hosts):
            errors.append(f"{name}: a list of host names")
        else:
            errors.extend(f"{name}: {error}" for error in host_pattern_errors(hosts))
    return errors


def host_pattern_errors(patterns: list[str]) -> list[str]:
    errors = []
    for pattern in patterns:
        name = pattern.strip().lower()
        name = name[2:] if name.startswith("*.") else name.strip("[]")
        try:
            ipaddress.ip_address(name)
        except ValueError:
            if not _HOST_NAME.match(name):
                errors.append(f"{pattern!r} is not a host name (or *.domain)")
    return errors
