"""GTFS fares (fare_attributes.txt, fare_rules.txt) applied per ride.

A ride is one leg on one route, from a boarding stop to an alighting stop;
its zones are the ``zone_id`` of every stop it passes, in order.  A fare
applies to a ride when

- the fare has no fare_rules row at all (then it applies to every ride of its
  agency's routes, or every ride when it names no agency), or
- one of its rows without ``contains_id`` matches the ride's route, first zone
  (``origin_id``) and last zone (``destination_id``), an empty value matching
  anything, or
- for one (route, origin, destination) of its rows with ``contains_id``
  matching the ride as above, the zones the ride passes are exactly the
  ``contains_id`` values of those rows.

Several fares apply: the cheapest is charged; none applies: the ride has no
fare (None).  Fare transfers (``transfers``, ``transfer_duration``) are not
applied here: every ride pays its own fare (``FareTable.transfer_fares``
names the fares that would allow transfers, for the importer to report).

``line_fares`` turns this into the compact per-line form make_benchmark.py
reads: the line's stops grouped into zone runs (consecutive stops with one
zone) and the fare from each run to each later (or the same) run.
Standard library only.
"""


class FareTable(object):
    """Fares and their rules, ready to price rides."""

    def __init__(self, prices, rules, agency_of_fare=None, transfers=None):
        """prices {fare_id: price}; rules [(fare_id, route_id, origin_id,
        destination_id, contains_id)]; agency_of_fare {fare_id: agency_id};
        transfers {fare_id: the transfers field as written}."""
        self.prices = dict(prices)
        self.agency_of_fare = dict(agency_of_fare or {})
        self.transfers = dict(transfers or {})
        self.plain = {}         # fare_id -> [(route, origin, destination)]
        self.contains = {}      # fare_id -> {(route, origin, destination): set of zones}
        for fare_id, route, origin, destination, contains in rules:
            if fare_id not in self.prices:
                continue
            if contains:
                group = self.contains.setdefault(fare_id, {})
                group.setdefault((route, origin, destination), set()).add(contains)
            else:
                self.plain.setdefault(fare_id, []).append((route, origin, destination))
        self._cache = {}

    def has_rules(self, fare_id):
        return fare_id in self.plain or fare_id in self.contains

    def applies(self, fare_id, route_id, agency_id, first, last, passed):
        """True when the fare applies to a ride (see the module's text)."""
        if not self.has_rules(fare_id):
            agency = self.agency_of_fare.get(fare_id, "")
            return not agency or not agency_id or agency == agency_id
        for route, origin, destination in self.plain.get(fare_id, ()):
            if (not route or route == route_id) and (not origin or origin == first) and \
                    (not destination or destination == last):
                return True
        for (route, origin, destination), zones in self.contains.get(fare_id, {}).items():
            if (not route or route == route_id) and (not origin or origin == first) and \
                    (not destination or destination == last) and zones == passed:
                return True
        return False

    def ride_fare(self, route_id, zones, agency_id=""):
        """The cheapest fare applying to a ride through `zones` (in order), or None."""
        key = (route_id, agency_id, zones[0], zones[-1], frozenset(zones))
        if key not in self._cache:
            best = None
            for fare_id, price in self.prices.items():
                if (best is None or price < best) and \
                        self.applies(fare_id, route_id, agency_id, key[2], key[3], key[4]):
                    best = price
            self._cache[key] = best
        return self._cache[key]

    def transfer_fares(self):
        """Fare ids whose fare_attributes allow transfers (transfers not 0)."""
        return sorted(f for f in self.prices if self.transfers.get(f, "") != "0")


def zone_runs(zones):
    """Run index of each position: consecutive positions with one zone share a run.

    >>> zone_runs(["1", "1", "2", "1"])
    [0, 0, 1, 2]
    """
    runs = []
    for k, zone in enumerate(zones):
        runs.append(0 if k == 0 else runs[-1] + (zone != zones[k - 1]))
    return runs


def line_fares(table, route_id, zones, agency_id=""):
    """A line's fares from the zone of each of its stops.

    -> (flat fare or None, fares matrix or None): a flat fare when every ride
    on the line costs the same; else fares[a][b] = the fare of a ride boarding
    in zone run a and alighting in run b (a <= b; None where no fare applies or
    b < a); (None, None) when no ride on the line has a fare.
    """
    runs = zone_runs(zones)
    count = runs[-1] + 1 if runs else 0
    run_zones = []
    for zone, run in zip(zones, runs):
        if run == len(run_zones):
            run_zones.append(zone)
    fares = [[None] * count for _ in range(count)]
    priced = set()
    for a in range(count):
        for b in range(a, count):
            fare = table.ride_fare(route_id, run_zones[a:b + 1], agency_id)
            fares[a][b] = fare
            if fare is not None:
                priced.add(fare)
    if not priced:
        return None, None
    unpriced = sum(1 for a in range(count) for b in range(a, count) if fares[a][b] is None)
    if len(priced) == 1 and not unpriced:
        return priced.pop(), None
    return None, fares


def unpriced_pairs(fares):
    """How many (boarding run, alighting run) pairs of a fares matrix have no fare."""
    n = len(fares)
    return sum(1 for a in range(n) for b in range(a, n) if fares[a][b] is None)
