"""Secrets kept out of everything a run records: a kernel command line or an environment may carry the web
PIN (ssdbench.pin=) or a lab token, and a result, a log or a bundle travels further than the appliance."""

import re

REDACTED = "<redacted>"
# A setting is secret when the last part of its name says so: ssdbench.pin, SSDBENCH_TOKEN, db_password.
SECRET_NAME = re.compile(r"(^|[._-])(pin|token|pass|passwd|password|secret|key|auth|credentials?)$", re.I)
# A word of a command line that sets something: name=value, the value maybe in double quotes.
SETTING = re.compile(r'(?<!\S)([^\s=]+)=("[^"]*"|\S*)')


def secret(name):
    return SECRET_NAME.search(name) is not None


def command_line(text):
    """The command line with the value of every secret setting replaced."""
    return SETTING.sub(lambda m: f"{m[1]}={REDACTED}" if secret(m[1]) else m[0], text)


def environment(env):
    """The environment without its secret variables: for a child process that needs none of them."""
    return {name: value for name, value in env.items() if not secret(name)}
