"""Reading a view made of overlay layers as overlayfs shows it (see open_codex_lib.view).

The overlay's rules are the host's (``ocflow_host``, there only inside ocflow): the tests of
views made of layers run embedded, through ``cargo test -p ocflow-core --lib bridge_host``,
and are skipped by a plain ``pytest``.
"""

import os

import pytest
from open_codex_lib.commands import default_test_command
from open_codex_lib.view import View

try:
    import ocflow_host
except ImportError:
    ocflow_host = None


def whiteout(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.mknod(path, 0o600 | 0o020000, os.makedev(0, 0))


def write(path, text="x"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


@pytest.fixture
def layers(tmp_path):
    """upper (what a command wrote), changes, snapshot: top first."""
    if ocflow_host is None:
        pytest.skip("views made of layers are read by ocflow's own rules (ocflow_host)")
    upper, changes, snapshot = (str(tmp_path / name) for name in ("upper", "changes", "snap"))
    for directory in (upper, changes, snapshot):
        os.makedirs(directory)
    write(f"{snapshot}/keep.py", "snapshot")
    write(f"{snapshot}/gone.py")
    write(f"{snapshot}/old/a.py")
    write(f"{snapshot}/old/sub/b.py")
    write(f"{snapshot}/was_file")
    write(f"{snapshot}/remade/kept.py")
    write(f"{changes}/keep.py", "changed")
    whiteout(f"{changes}/gone.py")
    whiteout(f"{changes}/old")
    write(f"{changes}/was_file/inside.py")
    write(f"{upper}/new/test_new.py")
    os.makedirs(f"{upper}/remade")
    try:
        os.setxattr(f"{upper}/remade", "user.overlay.opaque", b"y")
    except OSError:
        pytest.skip("no user extended attributes on this file system")
    write(f"{upper}/remade/fresh.py")
    return [upper, changes, snapshot]


def test_a_path_is_read_from_the_highest_layer_that_has_it(layers):
    view = View("/nonexistent", layers)
    with open(view.path("keep.py"), encoding="utf-8") as f:
        assert f.read() == "changed"
    assert view.path("gone.py") is None
    assert view.path("old/a.py") is None and view.path("old/sub/b.py") is None
    assert view.isfile("was_file/inside.py")
    assert view.path("was_file") == os.path.join(layers[1], "was_file")
    assert view.isfile("new/test_new.py")
    # An opaque directory hides what the layers beneath have in it.
    assert view.path("remade/kept.py") is None
    assert view.isfile("remade/fresh.py")
    assert view.path("missing/x") is None


def test_a_walk_merges_the_layers(layers):
    seen = {
        directory: (sorted(dirnames), sorted(filenames))
        for directory, dirnames, filenames in View("/nonexistent", layers).walk()
    }
    assert seen == {
        ".": (["new", "remade", "was_file"], ["keep.py"]),
        "new": ([], ["test_new.py"]),
        "remade": ([], ["fresh.py"]),
        "was_file": ([], ["inside.py"]),
    }


def test_without_layers_the_work_dir_is_the_view(tmp_path):
    write(f"{tmp_path}/pkg/test_x.py")
    view = View(str(tmp_path))
    assert view.written == str(tmp_path)
    assert view.isfile("pkg/test_x.py")
    assert [d for d, _, _ in view.walk()] == [".", "pkg"]


@pytest.mark.skipif(ocflow_host is not None, reason="ocflow's host functions are here")
def test_without_the_host_a_view_made_of_layers_says_what_it_needs(tmp_path):
    view = View(str(tmp_path / "mount"), [str(tmp_path)])
    with pytest.raises(RuntimeError, match="ocflow_host"):
        view.isfile("pytest.ini")


def test_the_test_command_is_found_through_the_layers(tmp_path, layers):
    # The only Python test file is one a layer added; the mount point itself is empty.
    mount = tmp_path / "mount"
    mount.mkdir()
    assert default_test_command(View(str(mount), layers))[1] == "pytest"
    os.remove(f"{layers[0]}/new/test_new.py")
    whiteout(f"{layers[0]}/new/test_new.py")
    write(f"{layers[2]}/package.json", '{"scripts": {"test": "node --test"}}')
    assert default_test_command(View(str(mount), layers))[1] == "npm"


def test_a_symlink_is_followed_through_the_view(tmp_path, layers):
    # pytest.ini in the snapshot points at a file only a higher layer has.
    write(f"{layers[1]}/cfg/pytest.ini", "[pytest]\n")
    os.symlink("cfg/pytest.ini", f"{layers[2]}/pytest.ini")
    os.symlink("/etc/hostname", f"{layers[2]}/outside.ini")
    view = View(str(tmp_path / "mount"), layers)
    assert view.isfile("pytest.ini")
    assert view.resolve("pytest.ini") == os.path.join(layers[1], "cfg", "pytest.ini")
    assert view.resolve("outside.ini") is None
