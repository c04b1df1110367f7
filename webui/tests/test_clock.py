"""The appliance's clock (system/clock, issue 34): never before the image's build date; set from a real NTP
server (chronyd) by the first that answers, else from a real HTTPS lab's Date once its certificate, issued by a
CA of the test's own, has checked out. The clock is never set here: each test records what would have been."""

import contextlib
import email.utils
import http.server
import socket
import ssl
import threading
import time

import pytest
from conftest import free_port, make_ca, ntp_server

from ssdbench.system import clock

DAY = 86400


def release(folder, when):
    path = folder / "ssdbench-release"
    path.write_text(f"NAME=ssdbench\nBUILD_ID={time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(when))}\n")
    return str(path)


class Settime(list):
    def __call__(self, when):
        self.append(when)


@contextlib.contextmanager
def https_lab(cert, key, date):
    """An HTTPS server on 127.0.0.1 whose every answer (404) carries Date: `date`; its URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def date_time_string(self, timestamp=None):
            return email.utils.formatdate(date, usegmt=True)

        def do_HEAD(self):
            self.send_error(404)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def quiet_udp():
    """A UDP port that takes requests and never answers: an NTP server that is down."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.3", 0))
        yield sock.getsockname()[1]


def test_a_clock_behind_the_build_date_goes_to_it_and_one_after_stays(tmp_path):
    state = str(tmp_path / "clock.json")
    settime = Settime()
    built = time.time() + 30 * DAY
    record = clock.floor(settime, release(tmp_path, built), state)
    assert settime == [int(built)] and record["source"] == "build date" and clock.recorded(state) == record
    assert clock.said(record).startswith("the RTC read ") and "before the image was built" in clock.said(record)
    settime.clear()
    fresh = str(tmp_path / "another-boot.json")
    assert clock.floor(settime, release(tmp_path, time.time() - DAY), fresh)["source"] == "rtc" and not settime


def test_a_sync_before_the_floor_does_the_floor_first_and_its_record_stays(tmp_path, monkeypatch, quiet_udp):
    """udev starts DHCP on the boot's interfaces before S20dhcp's floor: the sync moves the clock up to the build
    date first, and the floor that comes after leaves the clock and the sync's record alone."""
    monkeypatch.setattr(clock, "POOL", "pool.invalid")
    monkeypatch.setattr(clock, "TRY_S", 0.2)
    state = str(tmp_path / "clock.json")
    built = time.time() + 30 * DAY
    settime = Settime()
    record = clock.sync(["127.0.0.3"], None, None, settime, release(tmp_path, built), state, quiet_udp)
    assert settime == [int(built)] and record["source"] == "build date" and record["not_synced"], record
    assert clock.floor(settime, release(tmp_path, built), state) == record and settime == [int(built)]


def test_the_first_ntp_server_that_answers_sets_the_clock(tmp_path, monkeypatch, quiet_udp):
    monkeypatch.setattr(clock, "POOL", "pool.invalid")
    monkeypatch.setattr(clock, "TRY_S", 0.2)
    port = free_port()
    state = str(tmp_path / "clock.json")
    settime = Settime()
    with ntp_server(str(tmp_path), port=port):
        # A server that does not answer (down) and one whose name does not resolve are passed over.
        started = time.time()
        record = clock.sync(["127.0.0.3", "nothing.invalid", "127.0.0.1"], None, None, settime, "/nowhere", state, port)
    assert record["source"] == "ntp" and record["server"] == "127.0.0.1", record
    # chronyd serves this host's own clock: the offset is near nothing, and the time set is now.
    assert abs(record["offset_s"]) < 0.5 and started - 1 < settime[0] < time.time() + 1, (record, settime)
    assert [t.split(":")[0] for t in record["tried"]] == ["NTP 127.0.0.3", "NTP nothing.invalid"], record
    assert clock.said(record) == f"set from the NTP server 127.0.0.1: {record['offset_s']:+.1f} s"


def test_no_time_before_the_build_date_and_the_lab_date_only_over_a_checked_certificate(tmp_path, monkeypatch):
    """The build date a day ahead of chronyd's time: NTP's answer is refused. The lab's Date then sets the clock,
    but only when its certificate checks out against the lab's own CA; a Date before the build date is refused
    too. A failed sync keeps what set the clock last, and says why."""
    monkeypatch.setattr(clock, "POOL", "pool.invalid")
    port = free_port()
    state = str(tmp_path / "clock.json")
    built = release(tmp_path, time.time() + DAY)
    ca, cert, key = make_ca(str(tmp_path), "127.0.0.1")
    clock.floor(Settime(), built, state)
    settime = Settime()
    ahead = int(time.time()) + 2 * DAY
    with ntp_server(str(tmp_path), port=port), https_lab(cert, key, ahead) as url:
        refused = clock.sync(["127.0.0.1"], lambda: url, None, settime, built, state, port)
        assert not settime and refused["source"] == "build date", refused
        assert (
            "NTP 127.0.0.1: its time, " in refused["not_synced"][0]
            and "before the image was built" in refused["not_synced"][0]
        )
        assert "CERTIFICATE_VERIFY_FAILED" in refused["not_synced"][-1], refused
        assert clock.said(refused).startswith("not synced (") and clock.said(refused).endswith(
            "kept from the build date"
        )
        record = clock.sync(["127.0.0.1"], lambda: url, ca, settime, built, state, port)
    assert settime == [ahead] and record["source"] == "lab" and record["server"] == url, record
    assert "not_synced" not in clock.recorded(state)
    with https_lab(cert, key, time.time()) as url:
        late = clock.sync([], lambda: url, ca, settime, built, state, port)
    assert settime == [ahead] and "is before the image was built" in late["not_synced"][-1], late


def test_the_lab_url_comes_from_the_boot_settings(tmp_path):
    settings = tmp_path / "env"
    settings.write_text("SSDBENCH_PORT=80\nSSDBENCH_UPLOAD=https://lab.example/\nSSDBENCH_TOKEN=t\n")
    assert clock.lab_from_settings(str(settings), 0) == "https://lab.example/"
    settings.write_text("SSDBENCH_UPLOAD=\n")
    assert clock.lab_from_settings(str(settings), 0) is None
    assert clock.lab_from_settings(str(tmp_path / "none"), 0) is None
