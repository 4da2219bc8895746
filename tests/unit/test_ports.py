import socket

from tests.support.ports import server_port


def test_a_server_port_comes_with_its_neighbours_free_and_is_handed_out_once():
    ports = [server_port(-2, 1) for _ in range(20)]
    taken = {q for p in ports for q in (p - 2, p, p + 1)}
    assert len(taken) == 3 * len(ports)  # no port, nor a neighbour, handed out twice
    for q in taken:
        with socket.socket() as s:
            s.bind(("127.0.0.1", q))


def test_a_server_port_is_below_the_ephemeral_range():
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    assert all(server_port() < low for _ in range(20)) or low - 10000 < 2000
