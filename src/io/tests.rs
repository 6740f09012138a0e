use std::io::Write;

use super::*;
use crate::hashing::feature_column;

fn temp(name: &str, bytes: &[u8]) -> String {
    let dir = std::env::temp_dir().join(format!("omtl-io-{}-{name}", std::process::id()));
    std::fs::write(&dir, bytes).unwrap();
    dir.to_string_lossy().into_owned()
}

fn read_all(path: &str, opts: Options) -> Result<Vec<Chunk>, ReadError> {
    Reader::open(path, opts)?.collect()
}

/// A row as (label, task id, features).
type RowOf = (f64, u32, Vec<(u32, f64)>);

fn rows(chunks: &[Chunk]) -> Vec<RowOf> {
    let mut out = Vec::new();
    for c in chunks {
        for r in 0..c.n_rows() {
            let (a, b) = (c.indptr[r] as usize, c.indptr[r + 1] as usize);
            let feats = c.indices[a..b]
                .iter()
                .copied()
                .zip(c.data[a..b].iter().copied())
                .collect();
            out.push((c.labels[r], c.task_ids[r], feats));
        }
    }
    out
}

#[test]
fn svmlight_with_qid_bom_crlf_and_comments() {
    let path = temp(
        "a.svm",
        b"\xEF\xBB\xBF# head\r\n1 qid:alice 1:0.5 3:1\r\n-1 qid:bob 2:1 # c\r\n\r\n+1 qid:alice 3:2 1:1\n",
    );
    let chunks = read_all(&path, Options::new(Format::Svmlight, 3)).unwrap();
    let r = rows(&chunks);
    assert_eq!(r.len(), 3);
    assert_eq!(r[0], (1.0, 0, vec![(0, 0.5), (2, 1.0)]));
    assert_eq!(r[1], (-1.0, 1, vec![(1, 1.0)]));
    assert_eq!(r[2], (1.0, 0, vec![(0, 1.0), (2, 2.0)])); // sorted
    assert_eq!(chunks[0].new_tasks, ["alice", "bob"]);
    assert_eq!(chunks[0].lines, [2, 3, 5]);
}

#[test]
fn bad_lines_name_the_line_or_are_skipped() {
    let path = temp("bad.svm", b"1 1:1\n1 x:1\n-1 2:1\n");
    let err = read_all(&path, Options::new(Format::Svmlight, 5)).unwrap_err();
    assert_eq!(err.line, Some(2));
    assert!(err.to_string().contains("line 2: feature index \"x\""), "{err}");
    let mut opts = Options::new(Format::Svmlight, 5);
    opts.skip_bad_lines = true;
    let chunks = read_all(&path, opts).unwrap();
    assert_eq!(rows(&chunks).len(), 2);
    assert_eq!(chunks.iter().map(|c| c.n_skipped).sum::<u64>(), 1);
}

#[test]
fn duplicates_that_sum_to_infinity_are_a_bad_line_that_can_be_skipped() {
    let text = b"1 qid:a 1:1\n1 qid:new 2:1e308 2:1e308\n-1 qid:b 1:-1e308 3:1 1:-1e308\n1 qid:a 2:2\n";
    let path = temp("inf.svm", text);
    let err = read_all(&path, Options::new(Format::Svmlight, 5)).unwrap_err();
    assert!(
        err.to_string()
            .ends_with("inf.svm, line 2: feature column 1 is not finite once its duplicates are summed"),
        "{err}"
    );
    let mut opts = Options::new(Format::Svmlight, 5);
    opts.skip_bad_lines = true;
    let chunks = read_all(&path, opts).unwrap();
    assert_eq!(rows(&chunks), [(1.0, 0, vec![(0, 1.0)]), (1.0, 0, vec![(1, 2.0)])]);
    assert_eq!(chunks[0].n_skipped, 2);
    assert_eq!(chunks[0].new_tasks, ["a"]); // the skipped lines' tasks are not the file's
    let vw = temp("inf.vw", b"1 |t a |s x:1e308 x:1e308\n");
    let err = read_all(&vw, Options::new(Format::Vw, 16)).unwrap_err();
    assert!(err.to_string().contains("line 1: feature column"), "{err}");
}

#[test]
fn streams_are_told_from_files() {
    let path = temp("plain.svm", b"1 1:1\n");
    assert!(!is_stream(&path) && is_stream("-"));
    assert!(!is_stream("/no/such/file"));
    #[cfg(unix)]
    assert!(is_stream("/dev/null"));
    assert_eq!(format_of_path("a/b.SVM.gz"), Some("svmlight"));
    assert_eq!(format_of_path("b.pq"), Some("parquet"));
    assert_eq!(format_of_path("b.gz"), None);
}

#[test]
fn huge_indices_and_the_width_are_clean_errors() {
    let path = temp("huge.svm", b"1 9223372036854775808:1\n");
    let err = read_all(&path, Options::new(Format::Svmlight, 5)).unwrap_err();
    assert!(err.message.contains("2^63"), "{err}");
    let path = temp("wide.svm", b"1 6:1\n");
    let err = read_all(&path, Options::new(Format::Svmlight, 5)).unwrap_err();
    assert!(err.message.contains("beyond the 5 feature columns"), "{err}");
    assert!(Reader::open(&path, Options::new(Format::Svmlight, MAX_COLUMNS + 1)).is_err());
}

#[test]
fn line_cap_skips_the_long_line_whole() {
    let mut text = b"1 1:1\n1 ".to_vec();
    text.extend(std::iter::repeat_n(b'1', 5000));
    text.extend_from_slice(b":1\n-1 2:1\n");
    let path = temp("long.svm", &text);
    let mut opts = Options::new(Format::Svmlight, 5);
    opts.max_line_bytes = 100;
    let err = read_all(&path, opts.clone()).unwrap_err();
    assert!(err.to_string().contains("line 2: line of 5004 bytes"), "{err}");
    opts.skip_bad_lines = true;
    let r = rows(&read_all(&path, opts).unwrap());
    assert_eq!(r.len(), 2);
    assert_eq!(r[1].0, -1.0);
}

#[test]
fn gzip_is_detected_by_its_magic_bytes() {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(b"1 qid:a 1:1\n0 qid:b 2:3\n").unwrap();
    let path = temp("z.data", &enc.finish().unwrap());
    let r = rows(&read_all(&path, Options::new(Format::Svmlight, 2)).unwrap());
    assert_eq!(r, vec![(1.0, 0, vec![(0, 1.0)]), (0.0, 1, vec![(1, 3.0)])]);
    let corrupt = temp("bad.gz", b"\x1f\x8b\x08\x00garbage");
    assert!(read_all(&corrupt, Options::new(Format::Svmlight, 2)).is_err());
}

#[test]
fn mixed_label_forms_and_tasks_are_errors() {
    let path = temp("mix.svm", b"1 1:1\n-1 1:1\n0 1:1\n");
    let err = read_all(&path, Options::new(Format::Svmlight, 2)).unwrap_err();
    assert_eq!(err.line, Some(3));
    let path = temp("mixq.svm", b"1 qid:a 1:1\n-1 1:1\n");
    let err = read_all(&path, Options::new(Format::Svmlight, 2)).unwrap_err();
    assert!(err.message.contains("no task, unlike line 1"), "{err}");
}

#[test]
fn vw_names_hash_as_feature_hasher_and_digits_are_indices() {
    let n = 1u64 << 18;
    let path = temp(
        "a.vw",
        b"1 |s 3:0.5 word |t school7\n-1 'tagx|s:2 7 |other b:3 |t school8\n",
    );
    let r = rows(&read_all(&path, Options::new(Format::Vw, n)).unwrap());
    let mut want = vec![(3, 0.5), (feature_column(b"s^word", n as usize) as u32, 1.0)];
    want.sort_by_key(|p| p.0);
    assert_eq!(r[0], (1.0, 0, want));
    let mut want = vec![(7, 2.0), (feature_column(b"other^b", n as usize) as u32, 3.0)];
    want.sort_by_key(|p| p.0);
    assert_eq!(r[1], (-1.0, 1, want));
    // The tag as the task; the default namespace hashes the bare name.
    let mut opts = Options::new(Format::Vw, n);
    opts.vw_task_namespace = None;
    let path = temp("b.vw", b"1 'u1| hello\n");
    let r = rows(&read_all(&path, opts).unwrap());
    assert_eq!(r[0].2, vec![(feature_column(b"hello", n as usize) as u32, 1.0)]);
    let path = temp("c.vw", b"1 2 |t a\n");
    let err = read_all(&path, Options::new(Format::Vw, n)).unwrap_err();
    assert!(err.message.contains("importance weight"), "{err}");
}

#[test]
fn csv_header_quotes_and_columns_by_name() {
    let path = temp(
        "a.csv",
        b"\xEF\xBB\xBFshop,x1,bought,x2\r\n\"east\",0.5,1,2\nwest,\"1e-3\",0,0\n",
    );
    let mut opts = Options::new(Format::Csv, 2);
    opts.csv_task_column = "shop".into();
    opts.csv_label_column = "bought".into();
    let chunks = read_all(&path, opts.clone()).unwrap();
    assert_eq!(chunks[0].feature_columns, ["x1", "x2"]);
    assert_eq!(
        rows(&chunks),
        vec![(1.0, 0, vec![(0, 0.5), (1, 2.0)]), (0.0, 1, vec![(0, 1e-3)])]
    );
    opts.csv_task_column = "nope".into();
    opts.skip_bad_lines = true;
    let err = read_all(&path, opts).unwrap_err();
    assert!(err.message.contains("no task column \"nope\""), "{err}");
}

#[test]
fn chunks_are_bounded_in_rows_and_bytes() {
    let text: String = (0..1000).map(|i| format!("1 qid:{} 1:{i}\n", i % 3)).collect();
    let path = temp("many.svm", text.as_bytes());
    let mut opts = Options::new(Format::Svmlight, 2);
    opts.chunk_rows = 64;
    let chunks = read_all(&path, opts.clone()).unwrap();
    assert!(chunks.iter().all(|c| c.n_rows() <= 64));
    assert_eq!(chunks.iter().map(Chunk::n_rows).sum::<usize>(), 1000);
    opts.chunk_rows = 10_000;
    opts.chunk_bytes = 100;
    let chunks = read_all(&path, opts).unwrap();
    assert!(chunks.len() > 50 && chunks.iter().all(|c| c.n_rows() <= 12));
    let (rx, handle) = spawn(Reader::open(&path, Options::new(Format::Svmlight, 2)).unwrap(), 1);
    assert_eq!(rx.iter().map(|c| c.unwrap().n_rows()).sum::<usize>(), 1000);
    handle.join().unwrap();
}

#[test]
fn numbers_parse_as_python_float() {
    for s in [
        "0.1",
        "1.",
        ".5",
        "-2.25",
        "123456789012345",
        "1e-3",
        "3.14159265358979",
        "0.30000000000000004",
    ] {
        assert_eq!(parse_number(s.as_bytes()), Some(s.parse::<f64>().unwrap()), "{s}");
    }
    for s in ["", ".", "1e999", "nan", "inf", "1,5"] {
        assert_eq!(parse_number(s.as_bytes()), None, "{s}");
    }
    let scan = scan_svmlight(
        &temp("s.svm", b"1 qid:b 0:1 7:2\n1 qid:a x:1\n-1 qid:b 2:1 # 9:1\n"),
        100,
    )
    .unwrap();
    assert_eq!((scan.max_index, scan.has_zero), (Some(7), true));
    assert_eq!(scan.tasks, ["b", "a"]);
}

#[test]
fn the_fast_number_path_reads_every_short_decimal_as_rusts_parser_does() {
    let mut rng = crate::rng::SplitMix64::new(11);
    let alphabet = b"0123456789.....e-+x :/\xff";
    for _ in 0..200_000 {
        let len = 1 + rng.below(16) as usize;
        let s: Vec<u8> = (0..len)
            .map(|_| {
                if rng.below(4) == 0 {
                    alphabet[rng.below(alphabet.len() as u64) as usize]
                } else {
                    b'0' + rng.below(10) as u8
                }
            })
            .collect();
        let reference = std::str::from_utf8(&s)
            .ok()
            .and_then(|t| t.parse::<f64>().ok())
            .filter(|v| v.is_finite());
        assert_eq!(parse_number(&s), reference, "{:?}", String::from_utf8_lossy(&s));
    }
}
