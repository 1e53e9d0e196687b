import unittest

from utils import calculate_metrics


class CalculateMetricsTest(unittest.TestCase):
    def test_metrics_of_three_values(self):
        self.assertEqual(calculate_metrics([1, 2, 3]), {"total": 6, "mean": 2.0, "variance": 2 / 3})


if __name__ == "__main__":
    unittest.main()
