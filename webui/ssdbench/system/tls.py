"""TLS to a lab: the system's CAs, plus the lab's own CA when it runs a private one (a tester gives it on the
stick as SSDBENCH/lab-ca.pem, which S30stick copies to LAB_CA_FILE at boot)."""

import ssl

LAB_CA_FILE = "/run/ssdbench/lab-ca.pem"


def context(cafile=None):
    """A client context that checks the certificate and the host name, against the system's CAs and `cafile`'s."""
    ctx = ssl.create_default_context()
    if cafile:
        ctx.load_verify_locations(cafile)
    return ctx
