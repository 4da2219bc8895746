from tests.support import ports


def test_a_port_whose_neighbour_is_busy_is_passed_over(monkeypatch):
    busy = 20000
    candidates = iter([busy + 2, busy - 1, 30000])  # p - 2 busy, then p + 1 busy, then all free
    monkeypatch.setattr(ports.random, "randrange", lambda low, high: next(candidates))
    monkeypatch.setattr(ports, "_free", lambda p: p != busy)
    monkeypatch.setattr(ports, "_HANDED_OUT", set())
    assert ports.server_port(-2, 1) == 30000


def test_no_port_nor_neighbour_is_handed_out_twice():
    picked = [ports.server_port(-2, 1) for _ in range(20)]
    assert len({q for p in picked for q in (p - 2, p, p + 1)}) == 3 * len(picked)
