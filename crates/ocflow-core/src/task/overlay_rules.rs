//! How overlayfs shows a stack of layers (top first), the one place its rules are written: a
//! whiteout (a character device 0/0) hides what lies beneath it, a file hides a directory of a
//! lower layer, and an opaque directory hides the lower layers' content. The views made of
//! layers (`task::layered_view`) keep their layers by these rules, and the library reads a
//! command's view through them (`engine::bridge_host`, called by `open_codex_lib/view.py`).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

/// The extended attributes that mark a directory opaque: overlays mounted in a user namespace
/// write `user.overlay.opaque`, others `trusted.overlay.opaque`.
const OPAQUE: [&str; 2] = ["user.overlay.opaque", "trusted.overlay.opaque"];

/// How many symlinks [`resolved_at`] follows before it gives up (a loop).
const MAX_LINKS: usize = 40;

/// An overlay whiteout: a character device 0/0 in an upper layer (a deletion).
pub(crate) fn is_whiteout(meta: &fs::Metadata) -> bool {
    meta.file_type().is_char_device() && meta.rdev() == 0
}

/// An opaque directory of an upper layer: it hides the lower ones' content (a directory
/// deleted and made again).
pub(crate) fn is_opaque(dir: &Path) -> bool {
    let mut value = [0u8; 4];
    OPAQUE.iter().any(|name| {
        rustix::fs::lgetxattr(dir, *name, &mut value).is_ok_and(|len| len >= 1 && value[0] == b'y')
    })
}

/// The parts of a path relative to the view, without empty ones and `.`.
fn parts(relative: &Path) -> Vec<&OsStr> {
    relative
        .components()
        .filter_map(|part| match part {
            Component::Normal(name) => Some(name),
            Component::ParentDir => Some(OsStr::new("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// The file or directory showing at `relative` in the view made of `layers` (top first), or
/// `None`: the highest layer that has the path shows it, unless a whiteout, a file or an opaque
/// directory on the way hides it.
pub(crate) fn shown_at(layers: &[PathBuf], relative: &Path) -> Option<PathBuf> {
    let parts = parts(relative);
    'layers: for layer in layers {
        let (mut current, mut sealed) = (layer.clone(), false);
        for (index, part) in parts.iter().enumerate() {
            current.push(part);
            let Ok(meta) = fs::symlink_metadata(&current) else {
                // Missing here: a lower layer may have it, unless a directory above was opaque.
                if sealed {
                    return None;
                }
                continue 'layers;
            };
            if is_whiteout(&meta) {
                return None;
            }
            if index == parts.len() - 1 {
                return Some(current);
            }
            if !meta.is_dir() {
                return None;
            }
            sealed = sealed || is_opaque(&current);
        }
        return Some(layer.clone());
    }
    None
}

/// Like [`shown_at`], following a symlink there through the view (a relative target may lie in
/// another layer); `None` for a dangling link, a loop, or one leading out of the view.
pub(crate) fn resolved_at(layers: &[PathBuf], relative: &Path) -> Option<PathBuf> {
    let mut relative = relative.to_path_buf();
    for _ in 0..MAX_LINKS {
        let found = shown_at(layers, &relative)?;
        if !fs::symlink_metadata(&found).is_ok_and(|meta| meta.is_symlink()) {
            return Some(found);
        }
        let target = fs::read_link(&found).ok()?;
        if target.is_absolute() {
            return None;
        }
        let parent = relative.parent().unwrap_or(Path::new(""));
        relative = normalized(&parent.join(target))?;
    }
    None
}

/// `path` with `.` and `..` taken out, as `os.path.normpath` does; `None` when it climbs out.
fn normalized(path: &Path) -> Option<PathBuf> {
    let mut kept: Vec<&OsStr> = Vec::new();
    for part in path.components() {
        match part {
            Component::Normal(name) => kept.push(name),
            Component::ParentDir => {
                kept.pop()?;
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Some(kept.iter().collect())
}

/// What shows in one directory of the view: its subdirectories and the rest, each sorted.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Listing {
    pub(crate) dirs: Vec<OsString>,
    pub(crate) files: Vec<OsString>,
}

/// What shows in the directory at `relative` (`.` for the top) of the view made of `layers`;
/// empty when no directory shows there. Symlinks are listed as files, never followed.
pub(crate) fn listing(layers: &[PathBuf], relative: &Path) -> Listing {
    let mut sources = layers.to_vec();
    for part in parts(relative) {
        match merged(&sources, part) {
            Some(Entry::Dir(below)) => sources = below,
            _ => return Listing::default(),
        }
    }
    // The highest source that has a name decides what it is. The kind is read from the
    // directory entry (no `lstat` per file: a walk of a large view stays a directory read);
    // only a character device is looked at closer, for a whiteout.
    let mut kinds: BTreeMap<OsString, Kind> = BTreeMap::new();
    for source in &sources {
        let Ok(entries) = fs::read_dir(source) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if kinds.contains_key(&name) {
                continue;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let shown = if kind.is_dir() {
                Kind::Dir
            } else if kind.is_char_device()
                && fs::symlink_metadata(entry.path()).is_ok_and(|meta| is_whiteout(&meta))
            {
                Kind::Hidden
            } else {
                Kind::File
            };
            kinds.insert(name, shown);
        }
    }
    let mut shown = Listing::default();
    for (name, kind) in kinds {
        match kind {
            Kind::Dir => shown.dirs.push(name),
            Kind::File => shown.files.push(name),
            Kind::Hidden => {}
        }
    }
    shown
}

/// What a name in a directory listing is, as the highest layer that has it says.
enum Kind {
    Dir,
    /// A file, a symlink or a special file.
    File,
    /// A whiteout: nothing shows.
    Hidden,
}

/// What the view shows at `name` in a directory merged from `sources` (top first).
enum Entry {
    /// A directory, merged from these directories of the layers (top first).
    Dir(Vec<PathBuf>),
    File,
}

/// The highest source that has `name` decides what it is; a directory merges with the
/// directories beneath it down to the first opaque one, or the first file or whiteout.
fn merged(sources: &[PathBuf], name: &OsStr) -> Option<Entry> {
    let mut below: Option<Vec<PathBuf>> = None;
    for source in sources {
        let path = source.join(name);
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        match below.as_mut() {
            None if is_whiteout(&meta) => return None,
            None if !meta.is_dir() => return Some(Entry::File),
            None => {
                let sealed = is_opaque(&path);
                below = Some(vec![path]);
                if sealed {
                    break;
                }
            }
            // A file or whiteout beneath a directory: hidden by it, with all beneath.
            Some(_) if !meta.is_dir() => break,
            Some(dirs) => {
                let sealed = is_opaque(&path);
                dirs.push(path);
                if sealed {
                    break;
                }
            }
        }
    }
    below.map(Entry::Dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whiteout(path: &Path) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::empty(),
            rustix::fs::makedev(0, 0),
        )
        .unwrap();
    }

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    /// upper (what a command wrote), changes, snapshot: top first. `None` where this file
    /// system keeps no user extended attributes (an opaque directory cannot be made).
    fn layers(root: &Path) -> Option<Vec<PathBuf>> {
        let [upper, changes, snapshot] = ["upper", "changes", "snap"].map(|n| root.join(n));
        for dir in [&upper, &changes, &snapshot] {
            fs::create_dir_all(dir).unwrap();
        }
        write(&snapshot.join("keep.py"), "snapshot");
        write(&snapshot.join("gone.py"), "x");
        write(&snapshot.join("old/a.py"), "x");
        write(&snapshot.join("old/sub/b.py"), "x");
        write(&snapshot.join("was_file"), "x");
        write(&snapshot.join("remade/kept.py"), "x");
        write(&changes.join("keep.py"), "changed");
        whiteout(&changes.join("gone.py"));
        whiteout(&changes.join("old"));
        write(&changes.join("was_file/inside.py"), "x");
        write(&upper.join("new/test_new.py"), "x");
        fs::create_dir_all(upper.join("remade")).unwrap();
        let flags = rustix::fs::XattrFlags::empty();
        if rustix::fs::lsetxattr(upper.join("remade"), OPAQUE[0], b"y", flags).is_err() {
            eprintln!("SKIPPED: no user extended attributes on this file system");
            return None;
        }
        write(&upper.join("remade/fresh.py"), "x");
        Some(vec![upper, changes, snapshot])
    }

    fn is_file(layers: &[PathBuf], relative: &str) -> bool {
        resolved_at(layers, Path::new(relative)).is_some_and(|found| found.is_file())
    }

    #[test]
    fn a_path_is_read_from_the_highest_layer_that_has_it() {
        let dir = tempfile::tempdir().unwrap();
        let Some(layers) = layers(dir.path()) else {
            return;
        };
        let keep = shown_at(&layers, Path::new("keep.py")).unwrap();
        assert_eq!(fs::read_to_string(keep).unwrap(), "changed");
        assert_eq!(shown_at(&layers, Path::new("gone.py")), None);
        assert_eq!(shown_at(&layers, Path::new("old/a.py")), None);
        assert_eq!(shown_at(&layers, Path::new("old/sub/b.py")), None);
        assert!(is_file(&layers, "was_file/inside.py"));
        assert_eq!(
            shown_at(&layers, Path::new("was_file")),
            Some(layers[1].join("was_file"))
        );
        assert!(is_file(&layers, "new/test_new.py"));
        // An opaque directory hides what the layers beneath have in it.
        assert_eq!(shown_at(&layers, Path::new("remade/kept.py")), None);
        assert!(is_file(&layers, "remade/fresh.py"));
        assert_eq!(shown_at(&layers, Path::new("missing/x")), None);
        assert_eq!(shown_at(&layers, Path::new(".")), Some(layers[0].clone()));
    }

    #[test]
    fn a_listing_merges_the_layers() {
        let dir = tempfile::tempdir().unwrap();
        let Some(layers) = layers(dir.path()) else {
            return;
        };
        let names = |listing: Listing| -> (Vec<String>, Vec<String>) {
            let text = |names: Vec<OsString>| {
                names
                    .into_iter()
                    .map(|n| n.to_string_lossy().into_owned())
                    .collect()
            };
            (text(listing.dirs), text(listing.files))
        };
        let strings = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(
            names(listing(&layers, Path::new("."))),
            (
                strings(&["new", "remade", "was_file"]),
                strings(&["keep.py"])
            )
        );
        assert_eq!(
            names(listing(&layers, Path::new("new"))),
            (vec![], strings(&["test_new.py"]))
        );
        assert_eq!(
            names(listing(&layers, Path::new("remade"))),
            (vec![], strings(&["fresh.py"]))
        );
        assert_eq!(
            names(listing(&layers, Path::new("was_file"))),
            (vec![], strings(&["inside.py"]))
        );
        // Hidden or missing: nothing shows there.
        assert_eq!(listing(&layers, Path::new("old")), Listing::default());
        assert_eq!(listing(&layers, Path::new("keep.py")), Listing::default());
    }

    #[test]
    fn a_symlink_is_followed_through_the_view() {
        let dir = tempfile::tempdir().unwrap();
        let Some(layers) = layers(dir.path()) else {
            return;
        };
        // pytest.ini in the snapshot points at a file only a higher layer has.
        write(&layers[1].join("cfg/pytest.ini"), "[pytest]\n");
        std::os::unix::fs::symlink("cfg/pytest.ini", layers[2].join("pytest.ini")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", layers[2].join("outside.ini")).unwrap();
        std::os::unix::fs::symlink("../../up.ini", layers[2].join("climbs.ini")).unwrap();
        std::os::unix::fs::symlink("loop.ini", layers[2].join("loop.ini")).unwrap();
        assert!(is_file(&layers, "pytest.ini"));
        assert_eq!(
            resolved_at(&layers, Path::new("pytest.ini")),
            Some(layers[1].join("cfg/pytest.ini"))
        );
        assert_eq!(resolved_at(&layers, Path::new("outside.ini")), None);
        assert_eq!(resolved_at(&layers, Path::new("climbs.ini")), None);
        assert_eq!(resolved_at(&layers, Path::new("loop.ini")), None);
    }
}
