//! The `.omtl` model file in Rust: round trips with identical scores, and every kind of damage
//! refused (framing, checksum, lengths, header fields, a state that disagrees with the header).

use omtl::data::Rows;
use omtl::kernel::{BaseKernel, TaskKernel};
use omtl::learner::{Build, GraphSetting, KernelSetting, MTLinear, MTLinearParams, MTRBPParams, MTRBP};
use omtl::model::{Labels, Model, TaskRef, Tasks};
use omtl::model_file::{self, encode, Limits, CHECKSUM_LEN, MAGIC};
use omtl::Error;
use sha2::{Digest, Sha256};

fn stream(n: usize, d: usize) -> (Vec<f64>, Vec<f64>) {
    let mut rng = omtl::rng::SplitMix64::new(3);
    let x: Vec<f64> = (0..n * d)
        .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0)
        .collect();
    let y = (0..n).map(|t| if x[t * d] > 0.1 { 1.0 } else { -1.0 }).collect();
    (x, y)
}

fn mtrbp(k: usize, d: usize) -> MTRBP {
    let task_kernel = TaskKernel::complete(k).unwrap();
    let setting = KernelSetting::new(&task_kernel, BaseKernel::rbf(0.5).unwrap(), d);
    MTRBP::build(&MTRBPParams { budget: 8, seed: 2 }, &setting).unwrap()
}

/// A fitted MTRBP (int task ids) and its rows and tasks.
fn fitted() -> (Model, Vec<f64>, Vec<i64>) {
    let (n, d) = (60, 3);
    let (x, y) = stream(n, d);
    let tasks: Vec<i64> = (0..n as i64).map(|t| t % 3).collect();
    let mut model = Model::from_learner(mtrbp(3, d).into(), false).unwrap();
    model
        .learn(&Rows::dense(&x, n, d), Tasks::Ints(&tasks), Labels::Floats(&y))
        .unwrap();
    (model, x, tasks)
}

fn reframed(data: &[u8], edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let fixed = MAGIC.len() + 4 + 8;
    let head_len = u64::from_le_bytes(data[MAGIC.len() + 4..fixed].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&data[fixed..fixed + head_len]).unwrap();
    edit(&mut header);
    let head = serde_json::to_vec(&header).unwrap();
    let state = &data[fixed + head_len + 8..data.len() - CHECKSUM_LEN];
    let mut body = data[..MAGIC.len() + 4].to_vec();
    body.extend_from_slice(&(head.len() as u64).to_le_bytes());
    body.extend_from_slice(&head);
    body.extend_from_slice(&(state.len() as u64).to_le_bytes());
    body.extend_from_slice(state);
    let checksum = Sha256::digest(&body);
    body.extend_from_slice(&checksum);
    body
}

fn refused(data: &[u8], needle: &str) {
    match Model::from_bytes(data) {
        Err(Error::ModelFile(msg)) => assert!(msg.contains(needle), "{msg:?} lacks {needle:?}"),
        other => panic!("expected a model-file error containing {needle:?}, got {other:?}"),
    }
}

#[test]
fn a_saved_model_loads_with_identical_scores_and_bookkeeping() {
    let (model, x, tasks) = fitted();
    let dir = std::env::temp_dir().join(format!("omtl-model-file-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.omtl");
    model_file::save(&path, &model).unwrap();
    model_file::save(&path, &model).unwrap(); // replaces the file whole
    let loaded = model_file::load(&path).unwrap();
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file is left");
    std::fs::remove_dir_all(&dir).unwrap();
    let rows = Rows::dense(&x, tasks.len(), 3);
    assert_eq!(
        loaded.decision(&rows, Tasks::Ints(&tasks)).unwrap(),
        model.decision(&rows, Tasks::Ints(&tasks)).unwrap()
    );
    assert_eq!(loaded.header(), model.header());
    let book = loaded.book().unwrap();
    assert_eq!((book.n_seen(), book.seen_per_task().iter().sum::<u64>()), (60, 60));
    assert_eq!(loaded.task_index(TaskRef::Int(2)), Some(2));
    assert_eq!(loaded.task_index(TaskRef::Int(3)), None);
}

#[test]
fn string_task_ids_grow_an_open_ended_mtlinear() {
    let (n, d) = (40, 3);
    let (x, y) = stream(n, d);
    let users = ["u1", "u2", "u3", "u4"];
    let tasks: Vec<TaskRef> = (0..n).map(|t| TaskRef::Str(users[t % 4])).collect();
    let learner = MTLinear::build(
        &MTLinearParams::default(),
        &GraphSetting::new(&TaskKernel::complete_open(2).unwrap(), d),
    )
    .unwrap();
    let mut model = Model::from_learner(learner.into(), false).unwrap();
    let rows = Rows::dense(&x, n, d);
    model.learn(&rows, Tasks::Ids(&tasks), Labels::Floats(&y)).unwrap();
    let restored = Model::from_bytes(&model.to_bytes().unwrap()).unwrap();
    assert_eq!(restored.header().class, "MTLinear");
    assert!(restored.header().open_ended());
    assert_eq!(restored.task_index(TaskRef::Str("u4")), Some(3));
    assert_eq!(
        restored.decision(&rows, Tasks::Ids(&tasks)).unwrap(),
        model.decision(&rows, Tasks::Ids(&tasks)).unwrap()
    );
    // An unknown id scores as a task with no examples: the shared part alone.
    let alone = restored.decision(&rows, Tasks::All(TaskRef::Str("nobody"))).unwrap();
    assert_eq!(alone.len(), n);
    assert_eq!(restored.task_index(TaskRef::Str("nobody")), None);
}

#[test]
fn damaged_framing_is_refused() {
    let (model, _, _) = fitted();
    let data = model.to_bytes().unwrap();
    refused(&[], "magic");
    refused(&data[..data.len() - 1], "checksum");
    let mut flipped = data.clone();
    flipped[data.len() / 2] ^= 4;
    refused(&flipped, "checksum");
    let mut version = data[..data.len() - CHECKSUM_LEN].to_vec();
    version[MAGIC.len()] = 3;
    let checksum = Sha256::digest(&version);
    version.extend_from_slice(&checksum);
    refused(&version, "format version 3");
    let mut long = data[..data.len() - CHECKSUM_LEN].to_vec();
    long[MAGIC.len() + 4..MAGIC.len() + 12].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let checksum = Sha256::digest(&long);
    long.extend_from_slice(&checksum);
    refused(&long, "header length");
}

#[test]
fn a_header_that_disagrees_with_the_state_is_refused() {
    let (model, _, _) = fitted();
    let data = model.to_bytes().unwrap();
    refused(
        &reframed(&data, |h| h["class"] = "os.system".into()),
        "not an omtl learner",
    );
    refused(
        &reframed(&data, |h| h["class"] = "MTLinear".into()),
        "invalid parameter \"budget\" for MTLinear",
    );
    refused(
        &reframed(&data, |h| h["state_version"] = 1.into()),
        "native state version",
    );
    refused(
        &reframed(&data, |h| h["params"]["kernel"] = serde_json::json!(["rbf"])),
        "JSON type list",
    );
    refused(
        &reframed(&data, |h| h["fitted"]["n_seen"] = 61.into()),
        "counts disagree",
    );
    refused(
        &reframed(&data, |h| h["fitted"]["n_mistakes"] = (-1).into()),
        "n_mistakes",
    );
    refused(
        &reframed(&data, |h| h["fitted"]["n_features_in"] = 6.into()),
        "features",
    );
    refused(
        &reframed(&data, |h| h["fitted"]["seen_per_task"] = serde_json::json!([1, 2])),
        "one count per task",
    );
    refused(
        &reframed(&data, |h| h["fitted"]["seen_per_task"][0] = (1u64 << 63).into()),
        "2**63",
    );
    refused(
        &reframed(&data, |h| h["fitted"]["label_form"] = "strings".into()),
        "label form",
    );
    refused(
        &reframed(&data, |h| h["fitted"]["task_labels"] = serde_json::json!([1, 1])),
        "distinct",
    );
    refused(
        &reframed(&data, |h| h["fitted"] = serde_json::Value::Null),
        "unfitted model with a native state",
    );
    let huge = serde_json::json!({"__omtl_task_graph__": {
        "kind": "edges", "n_tasks": 1u64 << 32, "edges": [], "weights": null, "matrix": null}});
    refused(
        &reframed(&data, |h| h["params"]["graph"] = huge),
        "larger than the file allows",
    );
}

#[test]
fn a_writer_refuses_what_a_reader_would() {
    let (model, _, _) = fitted();
    let text = model.header().to_json().unwrap();
    let small = Limits {
        max_header: 10,
        ..Limits::default()
    };
    assert!(matches!(encode(&text, model.learner(), &small), Err(Error::CannotSave(m)) if m.contains("over the")));
    // A learner the file's bookkeeping does not describe.
    let other = mtrbp(4, 3).into();
    assert!(matches!(
        encode(&text, Some(&other), &Limits::default()),
        Err(Error::CannotSave(_))
    ));
    // A learner that has already learned has counts Model::from_learner cannot know.
    let mut trained = mtrbp(3, 3);
    let (x, y) = stream(5, 3);
    omtl::learner::learn(&mut trained, &Rows::dense(&x, 5, 3), &[0, 1, 2, 0, 1], &y).unwrap();
    assert!(Model::from_learner(trained.into(), false).is_err());
}
