"""Tests of .ci/claims.py: a wrong figure, a typed table, a missing provenance and a quote not in
the headers each fail; the right ones pass. Run: python3 .ci/test_claims.py"""

import json
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import claims  # noqa: E402

PROV = {"schema": 1, "commit": "abc123", "dirty": False, "command_line": ["nbody-interop", "bench", "--modes", "cpu"],
        "date_utc": "2026-12-05T00:00:00Z", "host": "h", "cpu": {"model": "X", "cores": 2, "threads": 2}, "gpu": None}


class Claims(unittest.TestCase):
    def setUp(self):
        self.dir = Path(tempfile.mkdtemp())
        (self.dir / "results").mkdir()
        self.csv = self.dir / "results" / "bench.csv"
        self.csv.write_text("mode,n,frame_ms_median,interactions_per_s\ncpu,1024,1.2345,2.5e9\ncpu,4096,10.5,2.4e9\n"
                            "cpu,4096,11.5,2.2e9\n")
        (self.dir / "results" / "bench.csv.provenance.json").write_text(json.dumps(PROV))
        self.doc = self.dir / "doc.md"
        claims._cache.clear()

    def test_figure_within_its_printed_digits_passes(self):
        claims.check_figure(self.doc, "1.23 ms", "results/bench.csv", "n=1024 frame_ms_median")
        claims.check_figure(self.doc, "2.5e9 interactions/s", "results/bench.csv", "n=1024 interactions_per_s")

    def test_figure_that_differs_fails(self):
        with self.assertRaisesRegex(claims.ClaimError, "holds 1.2345"):
            claims.check_figure(self.doc, "1.25 ms", "results/bench.csv", "n=1024 frame_ms_median")

    def test_figure_that_picks_two_records_fails(self):
        with self.assertRaisesRegex(claims.ClaimError, "pick 2 records"):
            claims.check_figure(self.doc, "10.5 ms", "results/bench.csv", "n=4096 frame_ms_median")

    def test_file_without_provenance_is_refused(self):
        (self.dir / "results" / "bench.csv.provenance.json").unlink()
        with self.assertRaisesRegex(claims.ClaimError, "no provenance"):
            claims.check_figure(self.doc, "1.23 ms", "results/bench.csv", "n=1024 frame_ms_median")

    def test_provenance_without_a_command_is_refused(self):
        (self.dir / "results" / "bench.csv.provenance.json").write_text(json.dumps(dict(PROV, command_line=None)))
        with self.assertRaisesRegex(claims.ClaimError, "lacks command_line"):
            claims.provenance(self.csv)

    def test_table_is_made_from_the_file_and_captioned(self):
        spec = "from results/bench.csv mode=cpu\ngroup n\ncol N | n | {}\ncol ms | median(frame_ms_median) | {:.2f}\n" \
               "col interactions/s | median(interactions_per_s) | e1\n"
        out = claims.build_table(self.doc, spec)
        self.assertIn("| 1024 | 1.23 | 2.5e9 |", out)
        self.assertIn("| 4096 | 11.00 | 2.3e9 |", out)
        self.assertIn("commit abc123", out)
        self.assertIn("`nbody-interop bench --modes cpu`", out)

    def test_a_typed_table_differs_from_the_generated_one(self):
        text = ("<!-- table\nfrom results/bench.csv n=1024\ncol ms | frame_ms_median | {:.3f}\n-->\n"
                "| ms |\n| ---: |\n| 9.999 |\n<!-- /table -->\n")
        m = claims.TABLE_RE.search(text)
        self.assertNotEqual(claims.build_table(self.doc, m.group("spec")), m.group("body"))

    def test_quote_is_found_after_the_comment_is_normalised(self):
        block = claims.normalize("Maps the \\p count graphics resources in \\p resources for access by CUDA.\n"
                                 " * The resources in \\p resources may be accessed by CUDA until they are unmapped. "
                                 "::cuGraphicsUnmapResources")
        self.assertTrue(claims.quote_in("Maps the count graphics resources in resources for access by CUDA.", [block]))
        self.assertTrue(claims.quote_in("Maps the count … until they are unmapped.", [block]))
        self.assertFalse(claims.quote_in("Maps every graphics resource", [block]))

    def test_quote_form_names_header_and_function(self):
        m = claims.QUOTE_RE.search("as “Maps the count graphics resources” [cuda.h: cuGraphicsMapResources] says")
        self.assertEqual((m.group(2), m.group(3)), ("cuda.h", "cuGraphicsMapResources"))

    def test_compact_scientific_format(self):
        self.assertEqual(claims.fmt(3.1e14, "e1"), "3.1e14")
        self.assertEqual(claims.fmt(9.96e-4, "e1"), "1.0e-3")
        self.assertEqual(claims.fmt(None, "{:.3f}"), "")


if __name__ == "__main__":
    unittest.main()
