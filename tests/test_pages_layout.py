"""transitlm.pages.layout: text cleaned of surrogates and control characters,
HTML escaping, and the number formats of the pages (metrics, deltas, counts)."""

import unittest

import transitlm.pages.layout


class TextTest(unittest.TestCase):
    def test_clean_text_escapes_surrogates_and_controls(self):
        self.assertEqual(transitlm.pages.layout.clean_text("a\udcffb"), "a\\udcffb")
        self.assertEqual(transitlm.pages.layout.clean_text("\x1b[31mred"), "\\x1b[31mred")
        self.assertEqual(transitlm.pages.layout.clean_text("tab\tnl\n"), "tab\tnl\n")
        self.assertEqual(transitlm.pages.layout.clean_text(12), "12")

    def test_esc(self):
        self.assertEqual(transitlm.pages.layout.esc("<script>\"'&"),
                         "&lt;script&gt;&quot;&#x27;&amp;")
        self.assertEqual(transitlm.pages.layout.esc(None), "")

    def test_fmt_metric(self):
        self.assertEqual(transitlm.pages.layout.fmt_metric("conn", 0.8421), "84.2%")
        self.assertEqual(transitlm.pages.layout.fmt_metric("lo", 0.77083), "0.771")
        self.assertEqual(transitlm.pages.layout.fmt_metric("mape", 7.2345), "7.23%")
        self.assertEqual(transitlm.pages.layout.fmt_metric("conn", None), "-")
        self.assertEqual(transitlm.pages.layout.fmt_metric("conn", float("nan")), "-")

    def test_fmt_delta(self):
        self.assertEqual(transitlm.pages.layout.fmt_delta("rem", 0.031), "+3.1 pp")
        self.assertEqual(transitlm.pages.layout.fmt_delta("sso", -0.0123), "-0.012")
        self.assertEqual(transitlm.pages.layout.fmt_delta("mape", None), "-")

    def test_fmt_count_pct(self):
        self.assertEqual(transitlm.pages.layout.fmt_count_pct(32, 38), "32 (84.2%)")
        self.assertEqual(transitlm.pages.layout.fmt_count_pct(0, 0), "0")


if __name__ == "__main__":
    unittest.main()
