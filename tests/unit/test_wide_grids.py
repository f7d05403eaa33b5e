"""benchmarks/wide_grids.py: the wide synthetic grids bench_simulate.py races on, built from real logs."""

from __future__ import annotations


def test_a_grid_resamples_each_configuration_from_real_logs_of_its_batch_size(real_data):
    from wide_grids import grid, pools

    from trainsweep.importer import read_dir
    from trainsweep.spec import load_spec

    pool = pools(read_dir(real_data / "cloud-ML" / "seismic-fcn"))["fcn"]
    result, spec = grid(pool, 12, seed=7)
    loaded = load_spec(spec, allow_retired=True)
    assert len(loaded.instance_types) == 12 and loaded.batch_sizes == [256, 512, 1024, 2048]
    assert len(result.files) == 12 * 4 * 3
    sources = {id(r) for logs in pool.by_batch.values() for r, _ in logs}
    for o in result.files:
        run = result.runs[o.path]
        assert id(run) not in sources  # a scaled copy: the real log is left as it was

        # one factor scales every step of a real log of that batch size: its noise is kept
        def factors(src, run=run):
            return {
                round(a / b, 6)
                for e, f in zip(run.epochs, src.epochs, strict=True)
                for a, b in zip(e.step_s, f.step_s, strict=True)
            }

        same_size = [r for r, _ in pool.by_batch[o.batch_size] if len(r.epochs) == len(run.epochs)]
        assert any(
            all(len(e.step_s) == len(f.step_s) for e, f in zip(run.epochs, src.epochs, strict=True))
            and len(factors(src)) == 1
            for src in same_size
        ), o.path
    again, _ = grid(pool, 12, seed=7)
    assert [o.path for o in again.files] == [o.path for o in result.files]  # the seed fixes the grid


def test_types_the_catalogue_does_not_price_go_to_the_spec_at_a_fitted_rate(real_data):
    from wide_grids import cloud_types, grid, pools

    from trainsweep.cost.prices import hourly_usd
    from trainsweep.importer import read_dir
    from trainsweep.simulate import simulate
    from trainsweep.spec import load_spec

    types = cloud_types()
    real = [(t, p) for t, p, is_real in types if is_real]
    fitted = {t: p for t, p, is_real in types if not is_real}
    assert len(types) > 50 and all(hourly_usd(t) == p for t, p in real)
    assert all(hourly_usd(t) is None for t in fitted)
    lo, hi = min(p for _, p in real), max(p for _, p in real)
    assert all(lo / 2 < p < 2 * hi for p in fitted.values())
    # a GPU machine is dearer than a CPU one of the same size, as in the priced types
    assert fitted["ml.g6e.4xlarge"] > 2 * fitted["ml.c6i.4xlarge"]

    pool = pools(read_dir(real_data / "cloud-ML" / "seismic-fcn"))["fcn"]
    result, spec = grid(pool, 50, seed=3)
    assert spec["prices"] and set(spec["prices"]) <= set(fitted)
    assert all(spec["prices"][t] == fitted[t] for t in spec["prices"])
    out = simulate(load_spec(spec, allow_retired=True), result).to_dict()
    assert out["exhaustive"]["unpriced_instance_types"] == [] and out["strategy_cost_usd"] > 0
    assert out["cost_ratio"] < 0.10


def test_a_grid_of_fewer_batch_sizes_keeps_its_seeds_instance_types(real_data):
    from wide_grids import grid, pools

    from trainsweep.importer import read_dir

    pool = pools(read_dir(real_data / "cloud-ML" / "seismic-fcn"))["fcn"]
    _, full = grid(pool, 10, seed=5)
    result, narrow = grid(pool, 10, seed=5, batch_sizes=2)
    assert narrow["instance_types"] == full["instance_types"]
    assert len(narrow["batch_sizes"]) == 2 and set(narrow["batch_sizes"]) < set(full["batch_sizes"])
    assert {o.batch_size for o in result.files} == set(narrow["batch_sizes"])
    assert len(result.files) == 10 * 2 * 3
    _, again = grid(pool, 10, seed=5, batch_sizes=2)
    assert again["batch_sizes"] == narrow["batch_sizes"]  # the seed draws them
    _, every = grid(pool, 10, seed=5, batch_sizes=4)
    assert every == full
