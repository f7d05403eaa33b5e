"""Instance catalogue and the seeds' VMTYPE names."""

from __future__ import annotations

import pytest

from trainsweep import instances


@pytest.mark.parametrize(
    ("name", "short"),
    [
        ("ml.p2.xlarge", "p2-1"),
        ("ml.p2.8xlarge", "p2-8"),
        ("ml.p2.16xlarge", "p2-16"),
        ("ml.p3.2xlarge", "p3-1"),
        ("ml.p3.8xlarge", "p3-4"),
        ("ml.p3.16xlarge", "p3-8"),
        ("ml.g4dn.xlarge", "g4dn-1"),
        ("ml.g4dn.12xlarge", "g4dn-4"),
    ],
)
def test_seed_vmtype_names_are_family_and_gpu_count(name, short):
    assert instances.vmtype(name) == short


def test_every_catalogue_entry_has_a_distinct_vmtype_that_maps_back():
    names = [t.name for t in instances.CATALOGUE.values()]
    shorts = [instances.vmtype(n) for n in names]
    assert len(set(shorts)) == len(shorts)
    assert all(instances.from_vmtype(s).name == n for s, n in zip(shorts, names, strict=True))


def test_the_seeds_older_names_are_understood():
    assert instances.from_vmtype("p3-2").name == "ml.p3.2xlarge"
    assert instances.from_vmtype("c5x").name == "ml.c5.xlarge"


def test_an_unknown_instance_type_names_the_known_ones():
    with pytest.raises(KeyError, match=r"ml\.p3\.2xlarge"):
        instances.lookup("ml.x9.huge")


def test_every_example_of_the_spelling_table_is_read():
    for form, examples, _ in instances.SPELLING_FORMS:
        for example in examples.split(", "):
            spelling = example.split(" ")[0]  # "p3-gpu4 (job ...)"
            assert instances.read_spelling(spelling) is not None, (form, spelling)


def test_a_spelled_out_size_with_more_gpus_than_it_has_is_not_read():
    assert instances.read_spelling("g4dnxlarge-2") is None
    assert instances.read_spelling("g4dn12xlarge-1").instance.name == "ml.g4dn.12xlarge"
    assert instances.read_spelling("g4dn12xlarge-1").gpus == 1


def test_a_vmtype_with_a_node_count_reads_as_that_many_instances_of_the_type():
    assert instances.vmtype_with_nodes("ml.p3.2xlarge", 2) == "p3-1x2"
    assert instances.vmtype_with_nodes("ml.p3.2xlarge", 1) == "p3-1"  # one node: the layout's VMTYPE
    two = instances.read_spelling("p3-1x2")
    assert (two.instance.name, two.nodes, two.gpus) == ("ml.p3.2xlarge", 2, 1)
    assert instances.read_spelling("local-cpux4").nodes == 4
    assert instances.read_spelling("g4dn2x-1x3").instance.name == "ml.g4dn.2xlarge"
    assert instances.read_spelling("p3-1x2-ec2").platform == "ec2"
    assert instances.read_spelling("p3-1x2-ec2").nodes == 2
    # the seeds' own names are not node counts
    assert instances.read_spelling("c4x").nodes == 1
    assert instances.read_spelling("p3-1").nodes == 1
    assert instances.read_spelling("p3-1x0") is None
