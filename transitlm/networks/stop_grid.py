"""Where the stops near a point are: a district's stops in a grid of cells
(``StopGrid``), so that the stations within reach of a trip's origin or
destination, and the nearest one, are found without looking at every stop of
the district; plus the distance formulas the router screens and bounds with.

The answers are those of a scan of every stop with the same floating-point
operations (tests/test_networks_router.py holds the grid to that scan), so
the router's labels do not depend on the grid.  Standard library only.
"""

import math

from common import EARTH_RADIUS_KM

KM_PER_DEG = EARTH_RADIUS_KM * math.pi / 180
RADIANS_PER_DEGREE = math.pi / 180.0     # common.haversine_km's factor


def images(lng0):
    """A point's longitude and its images a turn west and east: the flat map
    wraps at the 180th meridian, a stop's flat distance being the least to
    any of them (the same as to the point itself wherever the two lie less
    than 180 degrees of longitude apart)."""
    return (lng0, lng0 - 360.0, lng0 + 360.0)


def flat_km(net, stop, point, kx):
    # Equirectangular distance: within 0.1 % of haversine at district scale,
    # and far cheaper; used only to screen and to bound, never for output.
    lng, lat = net.lng[stop], net.lat[stop]
    dy = (lat - point[1]) * KM_PER_DEG
    return min(math.hypot((lng - image) * kx, dy) for image in images(point[0]))


GRID_DEG = 0.01          # StopGrid's cell side, degrees of longitude and of latitude


class StopGrid:
    """A district's stops in cells of GRID_DEG x GRID_DEG degrees, so that the
    stops within a flat distance of a point are found by looking at the cells
    around it rather than at every stop.  The answers are those of a scan of
    every stop with flat_km's formula (the same floating-point operations),
    in the district's stop order, across the 180th meridian too."""

    def __init__(self, net, stops):
        self.size = len(stops)
        self.cells = {}
        floor = math.floor
        for pos, s in enumerate(stops):
            lng, lat = net.lng[s], net.lat[s]
            key = (int(floor(lng / GRID_DEG)), int(floor(lat / GRID_DEG)))
            self.cells.setdefault(key, []).append((pos, s, lng, lat))
        xs = [k[0] for k in self.cells] or [0]
        ys = [k[1] for k in self.cells] or [0]
        self.box = (min(xs), max(xs), min(ys), max(ys))

    def _cells(self, lng0, lat0, kx, radius):
        """The cells holding every stop within `radius` flat km of (lng0, lat0)."""
        x0, x1, y0, y1 = self.box
        if kx > 1e-9:
            span = radius / kx
            lo, hi = math.floor((lng0 - span) / GRID_DEG) - 1, math.floor((lng0 + span) / GRID_DEG) + 1
            x0, x1 = max(x0, lo), min(x1, hi)
        span = radius / KM_PER_DEG
        lo, hi = math.floor((lat0 - span) / GRID_DEG) - 1, math.floor((lat0 + span) / GRID_DEG) + 1
        y0, y1 = max(y0, lo), min(y1, hi)
        if x1 < x0 or y1 < y0:
            return []
        if (x1 - x0 + 1) * (y1 - y0 + 1) > len(self.cells):
            return [cell for key, cell in self.cells.items() if x0 <= key[0] <= x1 and y0 <= key[1] <= y1]
        get = self.cells.get
        return [cell for cell in (get((x, y)) for x in range(x0, x1 + 1) for y in range(y0, y1 + 1)) if cell]

    def within(self, point, kx, radius):
        """[(district position, stop, flat km)] of the stops at most `radius` flat
        km from point (kx: km per degree of longitude at the point), in district order."""
        lng0, lat0 = point
        hypot = math.hypot
        out = []
        for cell in self._cells(lng0, lat0, kx, radius):
            for pos, s, lng, lat in cell:
                flat = hypot((lng - lng0) * kx, (lat - lat0) * KM_PER_DEG)
                if flat <= radius:
                    out.append((pos, s, flat))
        wrapped = [image for image in images(lng0)[1:] if self._reaches(image, kx, radius)]
        if wrapped:                     # across the 180th meridian: the least over the images
            least = {pos: (s, flat) for pos, s, flat in out}
            for image in wrapped:
                for cell in self._cells(image, lat0, kx, radius):
                    for pos, s, lng, lat in cell:
                        flat = hypot((lng - image) * kx, (lat - lat0) * KM_PER_DEG)
                        if flat <= radius and (pos not in least or flat < least[pos][1]):
                            least[pos] = (s, flat)
            out = [(pos, s, flat) for pos, (s, flat) in least.items()]
        out.sort()
        return out

    def _reaches(self, lng0, kx, radius):
        """Whether stops within `radius` flat km of longitude lng0 may be in the
        grid (a point's image a turn away almost never is)."""
        if kx <= 1e-9:
            return True
        span = radius / kx
        return math.floor((lng0 - span) / GRID_DEG) - 1 <= self.box[1] and \
            math.floor((lng0 + span) / GRID_DEG) + 1 >= self.box[0]

    def nearest(self, point, kx):
        """(flat km, stop) of the nearest stop (the lowest stop index among equals),
        or None for a district without stops."""
        radius = 1.0
        while self.size:
            found = self.within(point, kx, radius)
            if found:
                return min((flat, s) for _, s, flat in found)
            radius *= 4.0
        return None


def stop_grid(net, district):
    """The district's StopGrid, made on first use (and again if its stops changed)."""
    grid = getattr(district, "grid", None)
    if grid is None or grid.size != len(district.stops):
        grid = district.grid = StopGrid(net, district.stops)
    return grid


def latitude_cosines(net):
    """cos(latitude) of every stop, as common.haversine_km computes it (kept on the network)."""
    cosines = getattr(net, "cos_lat", None)
    if cosines is None or len(cosines) != len(net.ids):
        cosines = net.cos_lat = [math.cos(lat * RADIANS_PER_DEGREE) for lat in net.lat]
    return cosines
