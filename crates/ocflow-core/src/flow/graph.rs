//! The flow's dependency graph, computed once per flow revision: the order `--jobs 1` runs the
//! steps in (`Flow::topological_order`) and every step's ancestors as a bit set over that order.
//! Preparing a step asks "is this step an ancestor?" and walks its ancestors in order without
//! walking the flow again: on a 1000-step chain that per-step walk made the last steps several
//! times slower than the first (issue 28 §1).

use std::collections::HashMap;
use std::sync::Arc;

use ocflow_model::flow::Flow;

/// One flow revision's dependencies. Shared (`Arc`) so that a step's `Ancestors` can outlive a
/// borrow of the executor.
#[derive(Debug, Default)]
pub struct FlowGraph {
    /// Step ids by rank: `Flow::topological_order`, then any step it leaves out (a cycle, which
    /// validation refuses) in flow order.
    order: Vec<String>,
    /// Each step's rank, by id.
    rank: HashMap<String, usize>,
    /// By rank: the ranks of the step's ancestors, one bit each.
    ancestors: Vec<Vec<u64>>,
}

/// The steps one step depends on, directly or through others.
#[derive(Debug, Clone)]
pub struct Ancestors {
    graph: Arc<FlowGraph>,
    /// Ranks in `graph`, one bit each.
    bits: Vec<u64>,
}

impl FlowGraph {
    /// O(steps × words of a bit set) once, where asking each step's ancestors from the flow
    /// costs a walk of its ancestry every time.
    pub fn new(flow: &Flow) -> FlowGraph {
        let mut order: Vec<String> = flow
            .topological_order()
            .into_iter()
            .map(str::to_string)
            .collect();
        let mut rank: HashMap<String, usize> = order
            .iter()
            .enumerate()
            .map(|(i, id)| (id.clone(), i))
            .collect();
        for step in &flow.steps {
            if !rank.contains_key(&step.id) {
                rank.insert(step.id.clone(), order.len());
                order.push(step.id.clone());
            }
        }
        let words = order.len().div_ceil(64);
        let by_id: HashMap<&str, &[String]> = flow
            .steps
            .iter()
            .map(|s| (s.id.as_str(), s.depends_on.as_slice()))
            .collect();
        let mut ancestors: Vec<Vec<u64>> = Vec::with_capacity(order.len());
        for id in &order {
            let mut bits = vec![0u64; words];
            for dependency in by_id.get(id.as_str()).copied().unwrap_or_default() {
                // Dependencies come earlier in the order, so their sets are complete (a cycle's
                // steps never run: theirs may not be).
                let Some(&at) = rank.get(dependency) else {
                    continue;
                };
                bits[at / 64] |= 1 << (at % 64);
                if let Some(inherited) = ancestors.get(at) {
                    for (word, more) in bits.iter_mut().zip(inherited) {
                        *word |= more;
                    }
                }
            }
            ancestors.push(bits);
        }
        FlowGraph {
            order,
            rank,
            ancestors,
        }
    }

    /// The step ids in the order `--jobs 1` runs them.
    pub fn order(&self) -> &[String] {
        &self.order
    }

    /// Where `id` stands in `order`, `None` for a step not in the flow.
    pub fn rank(&self, id: &str) -> Option<usize> {
        self.rank.get(id).copied()
    }

    /// The ancestors of `id` (none for a step not in the flow).
    pub fn ancestors(self: &Arc<Self>, id: &str) -> Ancestors {
        let bits = self
            .rank(id)
            .and_then(|at| self.ancestors.get(at))
            .cloned()
            .unwrap_or_default();
        Ancestors {
            graph: Arc::clone(self),
            bits,
        }
    }

    /// Whether `ancestor` is one of `id`'s ancestors.
    pub fn depends_on(&self, id: &str, ancestor: &str) -> bool {
        match (self.rank(id), self.rank(ancestor)) {
            (Some(at), Some(other)) => has(&self.ancestors[at], other),
            _ => false,
        }
    }
}

fn has(bits: &[u64], at: usize) -> bool {
    bits.get(at / 64)
        .is_some_and(|word| word & (1 << (at % 64)) != 0)
}

impl Ancestors {
    pub fn contains(&self, id: &str) -> bool {
        self.graph.rank(id).is_some_and(|at| has(&self.bits, at))
    }

    /// The ancestors' ids in the order `--jobs 1` runs them: one look per 64 steps of the
    /// flow, one per ancestor.
    pub fn in_order(&self) -> impl Iterator<Item = &str> {
        self.bits
            .iter()
            .enumerate()
            .flat_map(move |(index, &word)| {
                let mut rest = word;
                std::iter::from_fn(move || {
                    if rest == 0 {
                        return None;
                    }
                    let bit = rest.trailing_zeros() as usize;
                    rest &= rest - 1;
                    self.graph.order.get(index * 64 + bit).map(String::as_str)
                })
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeSet;

    fn flow(steps: serde_json::Value) -> Flow {
        serde_json::from_value(json!({"version": 1, "task": "t", "steps": steps})).unwrap()
    }

    /// The graph answers what `Flow::ancestors` and `Flow::topological_order` answer, on a
    /// diamond, a chain, a step written before its dependency, and steps with none.
    #[test]
    fn ancestors_and_order_are_the_flows() {
        let mut steps = vec![
            json!({"id": "late", "operation": "x", "depends_on": ["d"]}),
            json!({"id": "a", "operation": "x"}),
            json!({"id": "b", "operation": "x", "depends_on": ["a"]}),
            json!({"id": "c", "operation": "x", "depends_on": ["a"]}),
            json!({"id": "d", "operation": "x", "depends_on": ["b", "c"]}),
            json!({"id": "alone", "operation": "x"}),
        ];
        for i in 0..130 {
            let depends: Vec<String> = if i == 0 {
                vec!["alone".into()]
            } else {
                vec![format!("s{}", i - 1)]
            };
            steps.push(json!({"id": format!("s{i}"), "operation": "x", "depends_on": depends}));
        }
        let flow = flow(serde_json::Value::Array(steps));
        let graph = Arc::new(FlowGraph::new(&flow));
        assert_eq!(graph.order(), flow.topological_order());
        for step in &flow.steps {
            let ancestors = graph.ancestors(&step.id);
            let expected = flow.ancestors(&step.id);
            let got: BTreeSet<String> = ancestors.in_order().map(str::to_string).collect();
            assert_eq!(got, expected, "ancestors of {}", step.id);
            for other in &flow.steps {
                assert_eq!(
                    ancestors.contains(&other.id),
                    expected.contains(&other.id),
                    "{} of {}",
                    other.id,
                    step.id
                );
                assert_eq!(
                    graph.depends_on(&step.id, &other.id),
                    expected.contains(&other.id)
                );
            }
            // In the order the flow runs: each ancestor's rank below the next one's.
            let ranks: Vec<usize> = ancestors
                .in_order()
                .filter_map(|id| graph.rank(id))
                .collect();
            assert!(ranks.windows(2).all(|w| w[0] < w[1]));
        }
        assert!(!graph.ancestors("nowhere").contains("a"));
        assert_eq!(graph.ancestors("s129").in_order().count(), 130);
    }
}
