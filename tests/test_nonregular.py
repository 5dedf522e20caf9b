"""Reading small files (settings, rule files) never waits on a FIFO nor reads more than the cap (limits.read_bounded)."""

from __future__ import annotations

import os

import pytest

from advisor.ingest.limits import read_bounded
from advisor.ingest.model import FileProblem


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "settings.yaml"
    os.mkfifo(fifo)
    with pytest.raises(FileProblem, match=r"is not a regular file \(it is a FIFO\)"):
        read_bounded(fifo, 1 << 20)


def test_a_device_that_never_ends_is_refused():
    with pytest.raises(FileProblem, match=r"it is a character device"):
        read_bounded("/dev/zero", 1 << 20)


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(FileProblem, match=r"it is a directory"):
        read_bounded(tmp_path, 1 << 20)


def test_a_sparse_file_over_the_cap_is_refused_by_its_size(tmp_path):
    sparse = tmp_path / "huge.json"
    with sparse.open("wb") as handle:
        handle.truncate(3 << 30)
    with pytest.raises(FileProblem, match=r"is 3\.0 GiB, over the 1\.0 MiB this file can have"):
        read_bounded(sparse, 1 << 20)


def test_a_file_that_claims_to_be_empty_is_read_no_further_than_the_cap():
    status = "/proc/self/status"  # st_size 0, about a kilobyte of text
    assert os.stat(status).st_size == 0
    with pytest.raises(FileProblem, match="is over the 100 B this file can have"):
        read_bounded(status, 100)
    assert b"Name:" in read_bounded(status, 1 << 20)


def test_a_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_bounded(tmp_path / "missing", 10)


def test_links_out_of_the_profile_are_not_followed_but_a_linked_rank_is_read(tmp_path):
    """A link to ``/`` or to another job's directory inside a profile directory must not merge foreign ranks: links to
    directories outside the tree are not entered (and a warning says so), while a link to a rank directory — gathering
    ranks written on other nodes — is read."""
    import shutil

    from conftest import SAMPLE_CLUSTER

    from advisor.ingest.discover import discover

    first, second = sorted(SAMPLE_CLUSTER.iterdir())
    profile = tmp_path / "prof"
    profile.mkdir()
    shutil.copytree(first, profile / first.name)
    other_node = tmp_path / "elsewhere" / "node1"
    shutil.copytree(second, other_node / second.name)
    (profile / "escape").symlink_to(tmp_path / "elsewhere")
    (profile / "root").symlink_to("/")
    layout = discover(profile)
    assert [r.path.name for r in layout.ranks] == [first.name]
    assert any(w.startswith(f"2 symbolic link(s) to directories outside {profile} were not followed (e.g. escape → ")
               for w in layout.warnings), layout.warnings
    (profile / "gathered_ascend_pt").symlink_to(other_node / second.name)
    assert sorted(r.path.name for r in discover(profile).ranks) == sorted([first.name, "gathered_ascend_pt"])


@pytest.mark.parametrize(("make", "kind"), [(lambda tmp: "/dev/null", "character device"),
                                            (lambda tmp: "/dev/zero", "character device"),
                                            (lambda tmp: (os.mkfifo(tmp / "fifo"), str(tmp / "fifo"))[1], "FIFO")])
def test_a_device_or_fifo_given_as_the_profile_says_what_it_is(tmp_path, make, kind):
    from typer.testing import CliRunner

    from advisor.cli import app

    path = make(tmp_path)
    result = CliRunner().invoke(app, ["diagnose", path])
    assert result.exit_code == 2
    assert f"{path}: is a {kind}, not a profile directory or trace file" in result.stderr


def test_a_path_too_long_for_the_os_is_a_usage_error_with_a_short_message(tmp_path):
    from typer.testing import CliRunner

    from advisor.cli import app

    result = CliRunner().invoke(app, ["diagnose", str(tmp_path / ("a" * 5000))])
    assert result.exit_code == 2 and "cannot be used (File name too long)" in result.stderr
    assert len(result.stderr) < 400
