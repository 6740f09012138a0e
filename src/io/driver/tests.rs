use super::*;
use crate::io::{scan_svmlight, svmlight_width, MAX_COLUMNS};
use crate::model::Estimator;

/// The scores of every chunk.
#[derive(Default)]
struct Collect(Vec<f64>);

impl ChunkSink for Collect {
    fn chunk(&mut self, _chunk: &Chunk, scores: &[f64], _form: &LabelForm) -> std::io::Result<()> {
        self.0.extend_from_slice(scores);
        Ok(())
    }
}

/// A file in the temporary folder, named after the test process.
fn write(name: &str, text: &str) -> String {
    let path = std::env::temp_dir().join(format!("omtl-driver-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

fn model(class: &str, params: &[(&str, &str)]) -> Model {
    Model::new(Estimator::from_text(class, params).unwrap())
}

/// Learns `path` (svmlight) in chunks of `chunk_rows` rows with `width`.
fn learn_file(
    stream: &mut StreamLearner,
    path: &str,
    chunk_rows: usize,
    width: Option<Width>,
) -> Result<Vec<f64>, StreamError> {
    let mut opts = Options::new(Format::Svmlight, 1);
    opts.chunk_rows = chunk_rows;
    let resolved = resolve_layout(path, &mut opts, None, None, None)?;
    let width = width.unwrap_or(resolved);
    if width == Width::Open {
        opts.n_features = MAX_COLUMNS;
    }
    let mut sink = Collect::default();
    stream.learn(
        Source::File(path.into()),
        &mut opts,
        width,
        true,
        &mut |_| Ok(()),
        &mut sink,
    )?;
    Ok(sink.0)
}

const SVMLIGHT: &str = "1 qid:b 1:0.5 3:1\n-1 qid:a 2:1\n1 qid:c 1:1 2:-1\n-1 qid:b 3:2\n1 qid:a 1:1\n";

#[test]
fn the_stream_learns_as_the_model_does_on_the_same_rows_in_small_chunks() {
    let path = write("a.svm", SVMLIGHT);
    let mut opts = Options::new(Format::Svmlight, 1);
    opts.chunk_rows = 2; // three chunks: tasks arrive over several of them
    let width = resolve_layout(&path, &mut opts, None, None, None).unwrap();
    assert_eq!((width, opts.zero_based), (Width::Fixed(3), false));
    let mut stream = StreamLearner::new(model("MTLinear", &[]));
    let mut sink = Collect::default();
    let mut lines = String::new();
    let mut report = |text: &str| {
        lines.push_str(text);
        lines.push('\n');
        Ok(())
    };
    stream
        .learn(Source::File(path), &mut opts, width, false, &mut report, &mut sink)
        .unwrap();
    // The same rows through Model::learn in one batch.
    let mut direct = model("MTLinear", &[]);
    let indptr = [0i64, 2, 3, 5, 6, 7];
    let indices = [0u32, 2, 1, 0, 1, 2, 0];
    let data = [0.5, 1.0, 1.0, 1.0, -1.0, 2.0, 1.0];
    let rows = Rows::Csr {
        indptr: &indptr,
        indices: &indices,
        data: &data,
        n_cols: 3,
    };
    let tasks = ["b", "a", "c", "b", "a"].map(TaskRef::Str);
    let scores = direct
        .learn(&rows, Tasks::Ids(&tasks), Labels::Ints(&[1, -1, 1, -1, 1]))
        .unwrap();
    assert_eq!(sink.0, scores);
    assert_eq!(stream.model.to_bytes().unwrap(), direct.to_bytes().unwrap());
    let book = stream.model.book().unwrap();
    assert_eq!(book.seen_per_task(), [2, 2, 1]);
    assert_eq!(stream.progress.mistakes, book.n_mistakes());
    // The report: the header, then examples 1, 2 and 4.
    let report: Vec<&str> = lines.lines().collect();
    assert_eq!(report.len(), 5, "{lines}");
    assert!(report[0].starts_with("average"));
    assert!(report[4].contains("           4 "));
}

#[test]
fn zero_one_files_predict_zero_one_labels_and_a_bad_line_names_file_and_line() {
    let path = write("b.svm", "0 qid:x 1:1\n1 qid:x 2:1\n");
    let mut stream = StreamLearner::new(model("MTLinear", &[]));
    learn_file(&mut stream, &path, 8192, None).unwrap();
    assert_eq!(*stream.model.label_form(), LabelForm::ZeroOne);
    assert_eq!(stream.model.book().unwrap().seen_per_task(), [2, 0]); // built with two tasks

    let bad = write("c.svm", "1 qid:x 1:1\n1 qid:x 1:zz\n");
    let mut stream = StreamLearner::new(model("MTLinear", &[]));
    let err = learn_file(&mut stream, &bad, 8192, None).unwrap_err();
    assert!(err.to_string().contains("c.svm, line 2:"), "{err}");
}

#[test]
fn a_stream_widens_mtlinear_and_a_fixed_width_learner_needs_its_width() {
    let mut opts = Options::new(Format::Svmlight, 1);
    assert_eq!(resolve_layout("-", &mut opts, None, None, None).unwrap(), Width::Open);
    let err = resolve_layout("-", &mut opts, None, None, Some("MTRBP")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("<stdin>: MTRBP on svmlight needs the width of a stream"),
        "{err}"
    );
    assert_eq!(
        resolve_layout("-", &mut opts, Some(7), None, Some("MTRBP")).unwrap(),
        Width::Fixed(7)
    );
    assert_eq!((opts.n_features, opts.zero_based), (7, false));

    // Read with an open width, chunk by chunk, the model widens to each chunk's largest index:
    // the scores and the model are those of the file read at its full width.
    let text = "1 qid:a 1:1\n-1 qid:b 2:1\n1 qid:a 7:1 1:1\n-1 qid:b 9:2\n1 qid:a 3:1\n";
    let path = write("open.svm", text);
    let mut open = StreamLearner::new(model("MTLinear", &[]));
    let mut fixed = StreamLearner::new(model("MTLinear", &[]));
    assert_eq!(
        learn_file(&mut open, &path, 2, Some(Width::Open)).unwrap(),
        learn_file(&mut fixed, &path, 2, None).unwrap()
    );
    assert_eq!(open.model.book().unwrap().n_features_in(), 9);
    assert_eq!(
        open.model
            .decision(&Rows::dense(&[1.0; 9], 1, 9), Tasks::All(TaskRef::Str("a")))
            .unwrap(),
        fixed
            .model
            .decision(&Rows::dense(&[1.0; 9], 1, 9), Tasks::All(TaskRef::Str("a")))
            .unwrap()
    );
    // A learner that keeps its width names the first row beyond it.
    let mut kept = StreamLearner::new(model("MTPerceptron", &[("n_tasks", "2")]));
    let err = learn_file(&mut kept, &path, 2, Some(Width::Open)).unwrap_err();
    assert!(
        err.to_string().ends_with("open.svm, line 3: feature index 7 beyond the model's 2 feature columns (MTPerceptron keeps the width it was built with; only MTLinear widens)"),
        "{err}"
    );
}

#[test]
fn prediction_refuses_unknown_tasks() {
    let train = write("d-train.svm", "1 qid:a 1:1\n-1 qid:b 2:1\n");
    let mut stream = StreamLearner::new(model("MTLinear", &[]));
    learn_file(&mut stream, &train, 8192, None).unwrap();
    let path = write("d.svm", "1 qid:a 1:1\n-1 qid:zz 2:1\n");
    let mut opts = Options::new(Format::Svmlight, 2);
    opts.require_labels = false;
    let err = predict(
        &stream.model,
        Source::File(path.clone()),
        &opts,
        &mut Collect::default(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{path}, line 2: task 'zz', which the model never saw (its 2 tasks: a, b)")
    );
}

#[test]
fn a_row_the_learner_refuses_is_named_and_skippable() {
    // 1e39 is beyond MTLinear's single-precision state.
    let path = write("huge.svm", "1 qid:a 1:1\n-1 qid:a 1:1e39\n1 qid:b 2:1\n");
    let mut stream = StreamLearner::new(model("MTLinear", &[]));
    let err = learn_file(&mut stream, &path, 8192, None).unwrap_err();
    assert!(err.to_string().contains("huge.svm, line 2: "), "{err}");
    assert!(err.to_string().contains("single precision"), "{err}");

    let mut opts = Options::new(Format::Svmlight, 1);
    opts.skip_bad_lines = true;
    let width = resolve_layout(&path, &mut opts, None, None, None).unwrap();
    let mut stream = StreamLearner::new(model("MTLinear", &[]));
    let mut sink = Collect::default();
    stream
        .learn(
            Source::File(path.clone()),
            &mut opts,
            width,
            true,
            &mut |_| Ok(()),
            &mut sink,
        )
        .unwrap();
    assert_eq!((sink.0.len(), stream.skipped), (2, 1));
    assert!(stream.first_skipped.as_deref().unwrap().contains("huge.svm, line 2: "));
    assert_eq!(stream.model.book().unwrap().n_seen(), 2);
    // The rows kept are learned as a file without the refused row.
    let without = write("huge-without.svm", "1 qid:a 1:1\n1 qid:b 2:1\n");
    let mut clean = StreamLearner::new(model("MTLinear", &[]));
    assert_eq!(learn_file(&mut clean, &without, 8192, None).unwrap(), sink.0);
}

#[test]
fn an_interrupt_stops_the_width_pass() {
    let text: String = (0..50_000).map(|i| format!("1 qid:t {}:1\n", i % 97 + 1)).collect();
    let path = write("interrupted.svm", &text);
    let stopped =
        crate::interrupt::with_hook_every(Duration::ZERO, Box::new(|| true), || svmlight_width(&path, 1 << 20));
    assert!(stopped.unwrap_err().is_interrupt());
    let stopped =
        crate::interrupt::with_hook_every(Duration::ZERO, Box::new(|| true), || scan_svmlight(&path, 1 << 20));
    assert!(stopped.unwrap_err().is_interrupt());
}

#[test]
fn the_width_pass_finds_what_the_task_scan_finds() {
    let long = format!("1 qid:a 9:1 {}\n", "x".repeat(300));
    let texts = [
        SVMLIGHT.to_string(),
        "\u{feff}1 qid:a 0:1 7:2 # 99:1 in a comment\r\n-1 qid:b 3:1 qid:5\r\n".to_string(),
        format!("1 4:1\n{long}-1 2:1 5:1 1:2:3 x:1"), // a line over the cap, no final newline
        format!("{long}1 2:1\n"),
        String::new(),
        "# only a comment\n\n".to_string(),
    ];
    for (k, text) in texts.iter().enumerate() {
        let path = write(&format!("w{k}.svm"), text);
        for cap in [100, 1 << 20] {
            let scan = scan_svmlight(&path, cap).unwrap();
            assert_eq!(
                svmlight_width(&path, cap).unwrap(),
                (scan.max_index, scan.has_zero),
                "{k} {cap}"
            );
        }
    }
}

#[test]
fn the_width_pass_reads_blocks_larger_than_its_buffer() {
    // Lines cut by the 1 MiB block boundaries of the source.
    let text: String = (0..200_000)
        .map(|i| format!("1 qid:t{} {}:1 {}:0.5\n", i % 7, i % 977 + 1, i % 13 + 1))
        .collect();
    let path = write("wide.svm", &text);
    let scan = scan_svmlight(&path, 1 << 20).unwrap();
    assert_eq!(svmlight_width(&path, 1 << 20).unwrap(), (scan.max_index, scan.has_zero));
    assert_eq!(scan.max_index, Some(977));
}

#[test]
fn a_chunk_that_is_not_learned_leaves_the_model_as_it_was() {
    // A fixed task set of one: the second task's chunk is refused, the model keeps the first.
    let path = write("e.svm", "1 qid:a 1:1\n1 qid:a 2:1\n-1 qid:b 1:1\n");
    let mut stream = StreamLearner::new(model("MTPerceptron", &[("n_tasks", "1")]));
    let err = learn_file(&mut stream, &path, 2, None).unwrap_err();
    assert!(err.to_string().contains("unknown task"), "{err}");
    let book = stream.model.book().unwrap();
    assert_eq!((book.n_seen(), book.labels().unwrap().len()), (2, 1));
}
