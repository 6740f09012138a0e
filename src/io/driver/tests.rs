use super::*;
use crate::io::{scan_svmlight, svmlight_width};
use crate::kernel::TaskKernel;
use crate::learner::{learn, Build, GraphSetting, MTLinear, MTLinearParams};

struct Collect(Vec<i64>, Vec<f64>);

impl ChunkSink for Collect {
    fn chunk(&mut self, _chunk: &Chunk, scores: &[f64], predicted: &[i64]) -> std::io::Result<()> {
        self.0.extend_from_slice(predicted);
        self.1.extend_from_slice(scores);
        Ok(())
    }
}

/// A file in the temporary folder, named after the test process.
fn write(name: &str, text: &str) -> String {
    let path = std::env::temp_dir().join(format!("omtl-driver-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

fn mt_linear(n_tasks: usize, width: usize) -> crate::Result<MTLinear> {
    MTLinear::build(
        &MTLinearParams::default(),
        &GraphSetting::new(&TaskKernel::complete_open(n_tasks)?, width),
    )
}

const SVMLIGHT: &str = "1 qid:b 1:0.5 3:1\n-1 qid:a 2:1\n1 qid:c 1:1 2:-1\n-1 qid:b 3:2\n1 qid:a 1:1\n";

#[test]
fn the_stream_learns_as_the_batch_api_does_on_the_same_rows_in_small_chunks() {
    let path = write("a.svm", SVMLIGHT);
    let mut opts = Options::new(Format::Svmlight, 1);
    opts.chunk_rows = 2; // three chunks: tasks arrive over several of them
    resolve_layout(&path, &mut opts, None, None).unwrap();
    assert_eq!((opts.n_features, opts.zero_based), (3, false));
    let mut stream = StreamLearner::new(None, TaskMap::default(), 2);
    let mut sink = Collect(Vec::new(), Vec::new());
    let mut lines = String::new();
    let mut report = |text: &str| {
        lines.push_str(text);
        lines.push('\n');
        Ok(())
    };
    stream
        .learn_file(&path, &mut opts, &mut mt_linear, false, &mut report, &mut sink)
        .unwrap();
    assert_eq!(stream.tasks.labels(), ["b", "a", "c"]);
    assert_eq!(stream.summary.n_seen, 5);
    assert_eq!(stream.summary.seen_per_task, [2, 2, 1]);
    // The same rows through the batch API, tasks numbered in order of appearance.
    let mut model = mt_linear(3, 3).unwrap();
    let indptr = [0i64, 2, 3, 5, 6, 7];
    let indices = [0u32, 2, 1, 0, 1, 2, 0];
    let data = [0.5, 1.0, 1.0, 1.0, -1.0, 2.0, 1.0];
    let rows = Rows::Csr {
        indptr: &indptr,
        indices: &indices,
        data: &data,
        n_cols: 3,
    };
    let scores = learn(&mut model, &rows, &[0, 1, 2, 0, 1], &[1.0, -1.0, 1.0, -1.0, 1.0]).unwrap();
    assert_eq!(sink.1, scores);
    let mistakes = scores
        .iter()
        .zip([1.0, -1.0, 1.0, -1.0, 1.0])
        .filter(|(&f, y)| predict_sign(f) != *y)
        .count() as u64;
    assert_eq!(stream.summary.n_mistakes, mistakes);
    // The report: the header, then examples 1, 2 and 4.
    let report: Vec<&str> = lines.lines().collect();
    assert_eq!(report.len(), 5, "{lines}");
    assert!(report[0].starts_with("average"));
    assert!(report[4].contains("           4 "));
}

#[test]
fn zero_one_files_predict_zero_one_labels_and_a_bad_line_names_file_and_line() {
    let path = write("b.svm", "0 qid:x 1:1\n1 qid:x 2:1\n");
    let mut opts = Options::new(Format::Svmlight, 1);
    resolve_layout(&path, &mut opts, None, None).unwrap();
    let mut stream = StreamLearner::new(None, TaskMap::default(), 2);
    let mut sink = Collect(Vec::new(), Vec::new());
    stream
        .learn_file(&path, &mut opts, &mut mt_linear, true, &mut |_| Ok(()), &mut sink)
        .unwrap();
    assert!(stream.summary.zero_one);
    assert!(sink.0.iter().all(|&p| p == 0 || p == 1));
    assert_eq!(stream.summary.seen_per_task, [2, 0]); // built with two tasks (min_tasks)

    let bad = write("c.svm", "1 qid:x 1:1\n1 qid:x 1:zz\n");
    let mut opts = Options::new(Format::Svmlight, 1);
    resolve_layout(&bad, &mut opts, None, None).unwrap();
    let mut stream = StreamLearner::new(None, TaskMap::default(), 2);
    let err = stream
        .learn_file(&bad, &mut opts, &mut mt_linear, true, &mut |_| Ok(()), &mut sink)
        .unwrap_err();
    assert!(err.to_string().contains("c.svm, line 2:"), "{err}");
}

#[test]
fn standard_input_svmlight_needs_its_width_and_prediction_refuses_unknown_tasks() {
    let mut opts = Options::new(Format::Svmlight, 1);
    let err = resolve_layout("-", &mut opts, None, None).unwrap_err();
    assert!(err
        .to_string()
        .starts_with("<stdin>: reading svmlight from standard input needs the width"));
    resolve_layout("-", &mut opts, Some(7), None).unwrap();
    assert_eq!((opts.n_features, opts.zero_based), (7, false));

    let path = write("d.svm", "1 qid:a 1:1\n-1 qid:zz 2:1\n");
    let mut opts = Options::new(Format::Svmlight, 1);
    resolve_layout(&path, &mut opts, None, None).unwrap();
    let model = mt_linear(2, 2).unwrap();
    let tasks = TaskMap::with_labels(vec!["a".into(), "b".into()]);
    opts.require_labels = false;
    let mut sink = Collect(Vec::new(), Vec::new());
    let err = predict_file(&model, &tasks, &path, &opts, &mut sink).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{path}, line 2: task 'zz', which the model never saw (its 2 tasks: a, b)")
    );
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
fn a_chunk_that_is_not_learned_leaves_the_task_names_as_they_were() {
    let path = write("e.svm", SVMLIGHT);
    let mut opts = Options::new(Format::Svmlight, 1);
    resolve_layout(&path, &mut opts, None, None).unwrap();
    let mut stream: StreamLearner<MTLinear> = StreamLearner::new(None, TaskMap::default(), 2);
    let mut refuse = |_: usize, _: usize| -> crate::Result<MTLinear> { Err(Error::Interrupted { scores: vec![] }) };
    let mut sink = Collect(Vec::new(), Vec::new());
    assert!(stream
        .learn_file(&path, &mut opts, &mut refuse, true, &mut |_| Ok(()), &mut sink)
        .is_err());
    assert!(stream.tasks.is_empty() && stream.model.is_none() && stream.summary.n_seen == 0);
    // Learned afterwards, the names come in file order as ever.
    stream
        .learn_file(&path, &mut opts, &mut mt_linear, true, &mut |_| Ok(()), &mut sink)
        .unwrap();
    assert_eq!(stream.tasks.labels(), ["b", "a", "c"]);
}
