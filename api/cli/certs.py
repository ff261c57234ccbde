"""``sealtrail certs ...``: the development PKI for mutual TLS, and what a certificate grants.

Exit codes: 0 written / shown; 1 a certificate that cannot be read; 2 a usage error (files
exist without ``--force``, a bad host name, an unreadable role map).

``cryptography`` and the principal and role layers are imported in the command bodies so that
``sealtrail --help`` does not load them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from api.cli.common import JsonOpt, emit, fail, out

__all__ = ["certs_app"]

certs_app = typer.Typer(no_args_is_help=True, help="Development PKI for mutual TLS; inspect certificates.")


@certs_app.command("dev")
def certs_dev(
    out_dir: Annotated[Path, typer.Option("--out", help="directory to write into (created if missing)")],
    host: Annotated[
        list[str] | None,
        typer.Option("--host", help="server DNS name or IP (repeatable)",
                     show_default="localhost, 127.0.0.1"),
    ] = None,
    days: Annotated[int, typer.Option(min=1, max=3650, help="validity in days")] = 825,
    force: Annotated[bool, typer.Option("--force", help="overwrite existing files")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Create a dev CA, a server certificate, one client certificate per role and roles.toml."""
    from api.certs import create_dev_pki

    try:
        pki = create_dev_pki(out_dir, hosts=host or ("localhost", "127.0.0.1"), days=days, force=force)
    except (ValueError, OSError) as exc:  # files exist without --force, a bad host, no permission
        fail(exc, as_json, code=2)

    def human() -> None:
        out.print(f"dev PKI in {pki.directory} (keys 0600; for development only)")
        rows = [("ca", pki.ca), ("server", pki.server), *pki.clients.items(),
                ("other CA", pki.other_ca), ("outsider", pki.outsider)]
        for label, c in rows:
            out.print(f"{label:<10} {c.cert_path}  sha256 {c.principal.fingerprint_sha256}", markup=False)
            out.print(f"{'':<10} {' '.join((c.principal.subject, *c.principal.sans))}", markup=False)
        out.print(f"role map   {pki.roles_file}")
        out.print(f"untrusted: {pki.outsider.cert_path} is signed by another CA and must be refused")

    emit(pki.to_json(), as_json, human)


@certs_app.command("show")
def certs_show(
    cert: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True, help="PEM certificate")],
    roles: Annotated[
        Path | None, typer.Option("--roles", help="role map (TOML) to evaluate the certificate against")
    ] = None,
    ca: Annotated[
        list[Path] | None,
        typer.Option("--ca", exists=True, dir_okay=False, help="verify against this CA bundle (repeatable)"),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the principal a certificate names (as a decision record binds it) and its roles.

    Without ``--ca`` nothing is verified ("verified": false): the roles are those the
    certificate would get if a server trusting its issuer accepted it.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    from api.roles import RoleMap, RoleMapError
    from audit.decide.principal import Principal, verify_chain
    from audit.errors import PrincipalError

    try:
        role_map = RoleMap.load(roles) if roles is not None else None
        anchors = [p.read_bytes() for p in ca or []]
        pem = cert.read_bytes()
    except (RoleMapError, OSError) as exc:
        fail(exc, as_json, code=2)
    try:
        principal = Principal.from_pem(pem)
        if anchors:
            der = x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)
            principal = verify_chain(der, [], anchors, datetime.now(UTC))
    except PrincipalError as exc:
        fail(exc, as_json, code=1)
    doc: dict[str, Any] = {**principal.to_json(), "not_before": principal.not_before,
                           "not_after": principal.not_after, "verified": bool(anchors)}
    if role_map is not None:
        doc["roles"] = sorted(role_map.roles_for(principal))

    def human() -> None:
        for k, v in doc.items():
            text = " ".join(v) if isinstance(v, list) else str(v)
            if k == "roles" and not anchors:
                text += "  (unverified: pass --ca to check the chain)"
            out.print(f"{k:<19}{text}", markup=False)

    emit(doc, as_json, human)
