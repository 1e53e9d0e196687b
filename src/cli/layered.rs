//! Configuration merged layer over layer — the workspace's file over the user's — field by
//! field: what the upper layer sets wins, the rest falls through. One trait, `Layered`; a section
//! of the file implements it by listing its fields (`layered!`), and a field left out of the list
//! does not compile, so a new setting cannot be dropped by the merge.

use std::collections::BTreeMap;

/// A layer of configuration over a lower one.
pub(crate) trait Layered {
    /// `self` where it says something, else `fallback`.
    fn or(self, fallback: Self) -> Self;
}

/// A value: the upper layer's when it sets one.
impl<T> Layered for Option<T> {
    fn or(self, fallback: Self) -> Self {
        Option::or(self, fallback)
    }
}

/// A list: both layers', the upper one's first.
impl<T> Layered for Vec<T> {
    fn or(self, fallback: Self) -> Self {
        self.into_iter().chain(fallback).collect()
    }
}

/// Named entries (`[llm.profiles.NAME]`, `[roles.NAME]`, `[prices."MODEL"]`): both layers',
/// an entry both name merged as its own type says (a profile field by field; a role or a price
/// whole, the upper layer's).
impl<V: Layered> Layered for BTreeMap<String, V> {
    fn or(self, fallback: Self) -> Self {
        let mut merged = fallback;
        for (name, upper) in self {
            let entry = match merged.remove(&name) {
                Some(lower) => upper.or(lower),
                None => upper,
            };
            merged.insert(name, entry);
        }
        merged
    }
}

/// Implements [`Layered`] for a section whose every field merges as its own type says:
/// `layered!(FileModel { model, temperature, max_tokens });`.
macro_rules! layered {
    ($section:ident { $($field:ident),* $(,)? }) => {
        impl $crate::cli::layered::Layered for $section {
            fn or(self, fallback: Self) -> Self {
                $section {
                    $($field: $crate::cli::layered::Layered::or(self.$field, fallback.$field)),*
                }
            }
        }
    };
}
pub(crate) use layered;

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Default)]
    struct Section {
        name: Option<String>,
        count: Option<u32>,
        paths: Vec<String>,
        entries: BTreeMap<String, Entry>,
    }
    layered!(Section {
        name,
        count,
        paths,
        entries
    });

    #[derive(Debug, PartialEq, Default)]
    struct Entry {
        url: Option<String>,
        model: Option<String>,
    }
    layered!(Entry { url, model });

    #[test]
    fn the_upper_layer_wins_field_by_field_and_the_rest_falls_through() {
        let upper = Section {
            name: Some("workspace".into()),
            paths: vec!["a".into()],
            entries: BTreeMap::from([(
                "fast".into(),
                Entry {
                    model: Some("small".into()),
                    url: None,
                },
            )]),
            ..Section::default()
        };
        let lower = Section {
            name: Some("user".into()),
            count: Some(3),
            paths: vec!["b".into()],
            entries: BTreeMap::from([
                (
                    "fast".into(),
                    Entry {
                        url: Some("http://mine/v1".into()),
                        model: Some("big".into()),
                    },
                ),
                ("other".into(), Entry::default()),
            ]),
        };
        let merged = upper.or(lower);
        assert_eq!(merged.name.as_deref(), Some("workspace"));
        assert_eq!(merged.count, Some(3));
        assert_eq!(merged.paths, ["a", "b"]);
        // An entry both name: field by field (the user's URL kept, the model the workspace's).
        assert_eq!(
            merged.entries["fast"],
            Entry {
                url: Some("http://mine/v1".into()),
                model: Some("small".into())
            }
        );
        assert!(merged.entries.contains_key("other"));
    }
}
