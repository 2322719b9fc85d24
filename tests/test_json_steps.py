"""transitlm/io/json_steps.py: JSON decoded in steps gives exactly what the json
module gives -- the same value, or the same error message and position --
on random documents full of escapes, surrogate pairs, long strings cut at
every place, broken escapes and texts cut short, with chunks of a dozen
characters (every string crosses chunks)."""

import json
import random
import unittest
from unittest import mock

import tests.support  # noqa: F401  (the repository on sys.path)
from transitlm.io import json_steps
from transitlm.io.bounded_json import parse_int

ATOMS = ("a", "\u00e9", "\u5730", '\\"', "\\\\", "\\n", "\\/", "\\u00e9", "\\ud83d\\ude00",
         "\\uD83D\\uDE00", "\\ud83d", "\\ude00", "\\ud83dx")
BROKEN = ("\\x", "\\u12", "\\uZZZZ", "\x01", "\\ud83d\\uZZ")
ENDINGS = (" x", ' "abc\\u12', ' "ab\\', '"', ' {"a', ' "\\ud83d', " [1 2", ", 3]")


def outcome(function, text):
    try:
        return "value", repr(function(text))
    except ValueError as exc:
        return "error", str(exc)


class StepsTest(unittest.TestCase):

    def document(self, rng, depth=0, broken=False):
        def string():
            atoms = ATOMS + (BROKEN if broken else ())
            return '"%s"' % "".join(rng.choice(atoms) for _ in range(rng.randrange(12)))
        roll = rng.random()
        if depth > 3 or roll < 0.4:
            return string() if rng.random() < 0.7 else rng.choice(
                ("1", "-2.5e3", "true", "null", "1" * 30, "NaN"))
        items = [self.document(rng, depth + 1, broken) for _ in range(rng.randrange(4))]
        if roll < 0.7:
            return "[%s]" % ", ".join(items)
        return "{%s}" % ",".join("%s: %s" % (string(), item) for item in items)

    def test_the_json_modules_values_and_errors(self):
        rng = random.Random(38)
        decoder = json.JSONDecoder()
        with mock.patch.object(json_steps, "AT_ONCE", 0):
            for _ in range(1500):
                text = self.document(rng, broken=rng.random() < 0.2)
                if rng.random() < 0.15:
                    text = text[:rng.randrange(len(text) + 1)]
                if rng.random() < 0.1:
                    text += rng.choice(ENDINGS)
                loads = outcome(lambda value: json.loads(value, parse_int=parse_int), text)
                raw = outcome(decoder.raw_decode, text)
                for chunk in (12, 29):
                    self.assertEqual(outcome(lambda value: json_steps.loads_in_steps(
                        value, parse_int=parse_int, chunk=chunk), text), loads, text)
                    self.assertEqual(outcome(lambda value: json_steps.raw_decode_in_steps(
                        value, chunk=chunk), text), raw, text)

    def test_duplicate_keys_and_a_long_text(self):
        # The last of duplicate keys wins, at the place of the first, also
        # when some of them were taken out of the text as long strings.
        long_key = "k" * 50
        text = '{"%s": 1, "a": 2, "%s": 3, "a": 4}' % (long_key, long_key)
        with mock.patch.object(json_steps, "AT_ONCE", 0):
            self.assertEqual(list(json_steps.loads_in_steps(text, chunk=16).items()),
                             list(json.loads(text).items()))
        text = json.dumps({"query": ['\\"{' * 400000, "\ud83d\ude00" * 1000], "n": [1, 2.5]})
        self.assertEqual(json_steps.loads_in_steps(text), json.loads(text))


if __name__ == "__main__":
    unittest.main()
