//! A task's plan for people: what it does, in order, with expected durations (`task plan`, the
//! plan section of `task describe`).

use groundskeeper_api::plan::{TaskPlan, human_seconds};

use super::table;

/// The plan's summary, id, and one row per step: order, node or member, action, keyspaces,
/// expected duration and where it comes from, and the note (why skipped, what in detail).
pub fn plan(plan: &TaskPlan) -> String {
    let mut out = format!("{}\n", plan.summary);
    if plan.id.is_empty() {
        return out;
    }
    out.push_str(&format!("plan id: {}", plan.id));
    if let Some(total) = plan.expected_seconds {
        out.push_str(&format!(
            "; expected {} in all (the steps added up: less where nodes of different racks run side by side)",
            human_seconds(total)
        ));
    }
    out.push('\n');
    if plan.steps.is_empty() {
        return out;
    }
    let rows: Vec<Vec<String>> = plan
        .steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            vec![
                (i + 1).to_string(),
                step.name.clone(),
                step.action.clone(),
                if step.keyspaces.is_empty() { "-".to_owned() } else { step.keyspaces.join(",") },
                step.expected_seconds.map_or("-".to_owned(), human_seconds),
                step.estimate.clone().unwrap_or_else(|| "-".to_owned()),
                step.note.clone().unwrap_or_default(),
            ]
        })
        .collect();
    out.push_str(&table(&["#", "NAME", "ACTION", "KEYSPACES", "EXPECTED", "FROM", "NOTE"], &rows));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use groundskeeper_api::plan::{PlanStep, plan_of};

    #[test]
    fn a_plan_reads_as_a_table_with_its_id_and_total() {
        let plan = plan_of(
            "defragment 1 of 2 member(s)".into(),
            vec![
                PlanStep {
                    name: "etcd-1".into(),
                    action: "Defragment".into(),
                    expected_seconds: Some(125),
                    estimate: Some("1.00 GiB at the default 50.0 MiB/s (no history)".into()),
                    note: Some("db 1073741824 bytes".into()),
                    ..PlanStep::default()
                },
                PlanStep {
                    name: "etcd-0".into(),
                    action: "Skip".into(),
                    note: Some("under the 100000000 bytes minimum".into()),
                    ..PlanStep::default()
                },
            ],
        );
        let text = super::plan(&plan);
        assert!(text.starts_with("defragment 1 of 2 member(s)\nplan id: "), "{text}");
        assert!(text.contains("expected 2m 05s in all"), "{text}");
        let rows: Vec<&str> = text.lines().skip(2).collect();
        assert!(rows[0].starts_with("#   NAME     ACTION"), "{text}");
        assert!(rows[1].contains("etcd-1") && rows[1].contains("2m 05s"), "{text}");
        assert!(rows[2].contains("Skip") && rows[2].contains("under the"), "{text}");
        // A plan that cannot be made says why, and nothing else.
        let none = TaskPlan { summary: "no plan can be made now: x".into(), ..TaskPlan::default() };
        assert_eq!(super::plan(&none), "no plan can be made now: x\n");
    }
}
