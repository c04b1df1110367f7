"""The review figures (results/headline.review), a run's summary (results/summary), the ranked bars of compare
(results/ranking) and the drive bench (results/bench), on runs made by the real engine: every value shown is
the stored metric fio's output gave."""

import json
import os

from ssdbench.results import bench, card, headline, ranking, repeatability, report_html, run_schema, store, summary
from ssdbench.run import fio_output

SMOKE_REVIEW = {
    "rand-write-4k-qd3",
    "rand-read-4k-qd3",
    "seq-read-128k",
    "seq-write-128k",
    "consistency",
    "trace-mb-s/trace",
    "trace-busy/trace",
    "burst-service/burst",
}


def runs_of(data_dir):
    db = store.connect(data_dir)
    try:
        return [store.get_run(db, r["id"]) for r in store.list_runs(db)]
    finally:
        db.close()


def stored(data_dir, run_id, step, name):
    db = store.connect(data_dir)
    try:
        return store.step_metric(db, run_id, step, name)
    finally:
        db.close()


def test_the_summary_holds_one_figure_per_methodology_test_each_the_stored_metric(smoke_run):
    _, data_dir = smoke_run
    run = runs_of(data_dir)[0]
    s = summary.of(run)
    # steady state stands as a figure only where it was reached; else the summary says "not reached"
    reached = stored(data_dir, run["id"], "consistency", "steady.reached") == 1
    steady = {"consistency"} if reached else set()
    assert {f["id"] for f in s["figures"]} == SMOKE_REVIEW - {"consistency"} | steady
    assert {f["id"] for f in s["not_reached"]} == {"consistency"} - steady
    for f in s["figures"]:
        assert f["value"] == stored(data_dir, run["id"], f["step"], f["name"])
        assert f["better"] == (headline.LOWER if f["id"].startswith(("trace-busy", "burst")) else headline.HIGHER)
    # smoke on a loop device compares with nothing, and says why; the flags do not repeat those reasons
    assert not s["comparable"] and any("smoke suite" in r for r in s["incomparable"])
    assert not {d for c in s["causes"] for d in c["details"]} & set(s["incomparable"])
    assert s["fio"].startswith("fio-")


def test_a_steady_state_not_reached_is_no_figure_and_is_said_so_in_the_summary_card_and_bench(smoke_run):
    run = runs_of(smoke_run[1])[0]
    consistency = next(s for s in run["steps"] if s["key"] == "consistency")
    for reached in (1.0, 0.0):
        held = next(m for m in consistency["metrics"] if m["name"] == "steady.reached")
        held["value"] = reached
        figures = {f["id"] for f in headline.review(run)}
        gone = headline.not_reached(run)
        assert ("consistency" in figures) == bool(reached)
        assert [f["id"] for f in gone] == ([] if reached else ["consistency"])
    assert gone[0]["why"] == held["source"] and "SNIA PTS rule" in gone[0]["why"]
    s = summary.of(run)
    assert "consistency" not in {f["id"] for f in s["figures"]}
    html = report_html.summary(s)
    assert '<tr data-figure="consistency">' in html and ">not reached</td>" in html
    c = card.of(run)
    assert c["not_reached"] == ["consistency"]
    row = bench.table([(c, 1)])["rows"][0]
    assert "consistency" not in row["values"] and row["not_reached"] == ["consistency"]
    chart = next(ch for ch in ranking.charts([c]) if ch["id"] == "consistency")
    assert chart["bars"] == [] and chart["not_reached"] == [ranking.label(c)]
    assert "not reached by run 1" in report_html.bar_chart(chart, "")


def test_a_step_that_did_not_end_done_gives_no_review_figure(smoke_run):
    run = runs_of(smoke_run[1])[0]
    for step in run["steps"]:
        if step["key"] == "consistency":
            step["state"] = "failed"
    assert "consistency" not in {f["id"] for f in headline.review(run)}


def test_bars_are_ranked_best_first_with_the_current_run_marked_and_its_set_spread(finished_repeat):
    data_dir, _, _ = finished_repeat
    runs = [card.of(r) for r in runs_of(data_dir)]
    charts = ranking.charts(runs[1:] + runs[:1], [runs] * len(runs))
    assert [c["id"] for c in charts] == ["rand-read-4k-qd3", "seq-read-128k", "seq-write-128k"]
    for c in charts:
        values = [b["value"] for b in c["bars"]]
        assert values == sorted(values, reverse=True)  # all three are higher-is-better
        assert [b["run"] for b in c["bars"] if b["current"]] == [runs[1]["id"]]
        for b in c["bars"]:
            assert b["value"] == stored(data_dir, b["run"], b["step"], c["name"])
        key = f"{c['bars'][0]['step']}/{c['name']}"
        figure = next(f for f in repeatability.summary(store.connect(data_dir), 1)["figures"] if f["key"] == key)
        assert all(b["spread"]["min"] == figure["min"] and b["spread"]["max"] == figure["max"] for b in c["bars"])
        assert c["scale"] == max(values)


def test_lower_is_better_ranks_the_lowest_first_and_a_run_of_another_workload_ranks_by_its_value(
    finished_repeat, smoke_run
):
    repeat_runs = runs_of(finished_repeat[0])
    smoke = runs_of(smoke_run[1])[0]
    charts = {c["id"]: c for c in ranking.charts([card.of(r) for r in [smoke, *repeat_runs]])}
    bars = charts["seq-read-128k"]["bars"]
    # one scale, one ranking: the smoke run alone in its workload, the others marked apart where they rank
    assert [b["value"] for b in bars] == sorted((b["value"] for b in bars), reverse=True)
    assert [b["apart"] for b in bars] == [not b["current"] for b in bars]
    assert all(b["why"][0] == "another workload" for b in bars if b["apart"])
    lower = ranking.ranked(bars, headline.LOWER)
    assert [b["value"] for b in lower] == sorted(b["value"] for b in bars)


def test_the_bench_has_a_row_per_drive_model_with_its_latest_done_runs_figures(finished_repeat, smoke_run):
    runs = runs_of(finished_repeat[0])
    for i, run in enumerate(runs):
        run["drive"]["model"] = "Drive A" if i < 2 else "Drive B"
    smoke = runs_of(smoke_run[1])[0]
    smoke["drive"]["model"] = "Drive C"
    table = bench.table(bench.latest(card.of(r) for r in [*runs, smoke]))
    assert [r["model"] for r in table["rows"]] == ["Drive A", "Drive B", "Drive C"]
    assert [r["run"] for r in table["rows"][:2]] == [runs[1]["id"], runs[2]["id"]]
    assert table["rows"][0]["runs"] == 2
    order = [headline.review_order(c["id"]) for c in table["columns"]]
    assert order == sorted(order) and {c["id"] for c in table["columns"]} == SMOKE_REVIEW
    for row, run in zip(table["rows"], [runs[1], runs[2], smoke]):
        assert row["values"] == {f["id"]: f["value"] for f in headline.review(run)}
    # the bench as bars (issue 37, item 8): each model that has the figure ranked best first, the best marked once
    for column in table["columns"]:
        chart = bench.chart(table, column["id"])
        values = [b["value"] for b in chart["bars"]]
        assert values == sorted(values, reverse=column["better"] == headline.HIGHER)
        assert [b.get("best", False) for b in chart["bars"]] == [i == 0 for i in range(len(values))]
        assert {b["label"] for b in chart["bars"]} == {r["model"] for r in table["rows"] if column["id"] in r["values"]}
        drawn = report_html.bar_chart(chart, bench.fineprint(table))
        wide, _, narrow = drawn.partition('<svg class="narrow"')  # the same bars, laid out for a phone
        assert wide.count("★ best") == min(1, len(values)) and wide.count("testbed: ") == len(values)
        assert narrow.count("★ best") == min(1, len(values)) and narrow.count('<g class="row') == len(values)
    assert bench.chart(table, "no-such-figure") is None


def test_the_tortured_drives_random_write_latency_is_a_figure_of_the_torture_step(smoke_run):
    """Issue 33, item 4: seed 002 saw the tortured drive's random writes take up to 1.4 s. The torture step keeps
    its average, maximum and percentile write latency, each fio's own number from its JSON, beside its IOPS."""
    run, data_dir = smoke_run
    step = next(s for s in run["steps"] if s["key"] == "torture-write")
    with open(os.path.join(data_dir, step["out_dir"], "fio.json")) as f:
        latency = fio_output.fio_result(f.read())["jobs"][0]["write"]["lat_ns"]
    metrics = {m["name"]: m for m in step["metrics"]}
    for stat in ("mean", "max"):
        m = metrics[f"write.lat_{stat}"]
        assert (m["value"], m["unit"], m["source"]) == (latency[stat], "ns", f"/jobs/0/write/lat_ns/{stat}")
    assert metrics["write.lat_p99.9"]["value"] == latency["percentile"]["99.900000"]
    assert 0 < metrics["write.lat_mean"]["value"] <= metrics["write.lat_max"]["value"]


def test_a_cards_texts_are_capped(finished_repeat):
    """Issue 35, item 4: compare and the bench show every card they list, and a card copies a run's texts (its fio
    version twice, in its tools and its testbed): each is capped, whatever the document held."""
    run = runs_of(finished_repeat[0])[0]
    run["drive"]["model"] = "M" * (run_schema.TEXT * 2)
    run["environment"]["tools"]["fio"] = "fio-" + "3" * (8 << 20)
    run["warnings"] = ["W" * (run_schema.TEXT + 1)]
    c = card.of(run)
    texts = []
    left = [c]
    while left:
        item = left.pop()
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, dict):
            left += item.values()
        elif isinstance(item, list):
            left += item
    assert max(map(len, texts)) == run_schema.TEXT
    assert c["drive"]["model"] == "M" * (run_schema.TEXT - 1) + "\N{HORIZONTAL ELLIPSIS}"
    assert len(json.dumps(c)) < 8 * run_schema.TEXT * 2
