"""Secrets kept out of what a run records: the kernel command line and the environment."""

from ssdbench.system import redact


def test_secrets_on_a_command_line_are_redacted_and_nothing_else():
    line = (
        "BOOT_IMAGE=/vmlinuz root=UUID=1-2 console=ttyS0,115200 ssdbench.pin=271828 ssdbench.port=80 "
        'ssdbench.token="abc def" ssdbench.upload=http://lab/ keymap=us quiet'
    )
    out = redact.command_line(line)
    assert "271828" not in out and "abc" not in out and "def" not in out
    assert out == (
        "BOOT_IMAGE=/vmlinuz root=UUID=1-2 console=ttyS0,115200 ssdbench.pin=<redacted> ssdbench.port=80 "
        "ssdbench.token=<redacted> ssdbench.upload=http://lab/ keymap=us quiet"
    )


def test_secret_variables_never_reach_a_child_process():
    env = {"PATH": "/bin", "SSDBENCH_PIN": "271828", "SSDBENCH_TOKEN": "t", "LAB_DB_PASSWORD": "p", "HOME": "/root"}
    assert redact.environment(env) == {"PATH": "/bin", "HOME": "/root"}
