"""GTFS feeds written by the tests."""

import csv
import json
import os
import zipfile


# A tiny two-route feed: a metro line A-B-C (both directions, parent station
# S_B with platforms B1/B2 used by the two directions) and a bus line C-D.
BASE_FEED = {
    "agency.txt": "agency_id,agency_name,agency_url,agency_timezone\n"
                  "X,Test Transit,http://x,Europe/Test_City\n",
    "stops.txt": "stop_id,stop_name,stop_lat,stop_lon,location_type,parent_station\n"
                 "A,Alpha,40.000,-73.000,,\n"
                 "S_B,Beta,40.010,-73.000,1,\n"
                 "B1,Beta,40.010,-73.000,0,S_B\n"
                 "B2,Beta,40.0101,-73.000,0,S_B\n"
                 "C,Gamma 地铁站,40.020,-73.000,,\n"
                 "D,Delta,40.030,-73.000,,\n",
    "routes.txt": "route_id,route_short_name,route_long_name,route_type\n"
                  "M,1,,1\n"
                  "BUS,,Crosstown 号线,3\n",
    "trips.txt": "route_id,service_id,trip_id,direction_id\n"
                 "M,WK,m1,0\nM,WK,m2,0\nM,WK,m3,1\nBUS,WK,b1,0\nM,SAT,s1,0\n",
    "calendar.txt": "service_id,monday,tuesday,wednesday,thursday,friday,saturday,sunday,"
                    "start_date,end_date\n"
                    "WK,1,1,1,1,1,0,0,20240101,20240107\n"
                    "SAT,0,0,0,0,0,1,0,20240101,20240107\n",
    "stop_times.txt": "trip_id,arrival_time,departure_time,stop_id,stop_sequence\n"
                      "m1,08:00:00,08:00:00,A,1\n"
                      "m1,08:02:00,08:02:30,B1,2\n"
                      "m1,08:05:00,08:05:00,C,3\n"
                      "m2,09:00:00,09:00:00,A,1\n"
                      "m2,,,B1,2\n"
                      "m2,09:06:00,09:06:00,C,3\n"
                      "m3,25:00:00,25:00:00,C,1\n"
                      "m3,25:03:00,25:03:00,B2,2\n"
                      "m3,25:05:00,25:05:00,A,3\n"
                      "b1,10:00:00,10:00:00,C,1\n"
                      "b1,10:10:00,10:10:00,D,2\n"
                      "s1,10:00:00,10:00:00,A,1\n"
                      "s1,10:09:00,10:09:00,D,2\n",
}


def network_file_with_prefix(folder, name, prefix):
    """(header, rows as dicts) of a network file import_gtfs.py wrote into
    ``folder``, with ``prefix`` put before every stop id it holds, field by
    field as the file layouts say (station_info.csv: stop_id and
    next_hop_stations; line_info.csv: each station's stop_id and station_id;
    hop_times.csv: from_stop_id, to_stop_id; line_service.csv: a direction
    named by its end stops, "<id>><id>").  What --id_prefix should write."""
    def read(file_name):
        with open(os.path.join(folder, file_name), encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            return reader.fieldnames, list(reader)

    header, rows = read(name)
    ids = {row["stop_id"] for row in read("station_info.csv")[1]}
    for row in rows:
        if name == "station_info.csv":
            row["stop_id"] = prefix + row["stop_id"]
            row["next_hop_stations"] = json.dumps(
                [prefix + hop for hop in json.loads(row["next_hop_stations"])],
                ensure_ascii=False)
        elif name == "line_info.csv":
            stations = json.loads(row["station_list"])
            for station in stations:
                station["stop_id"] = prefix + station["stop_id"]
                station["station_id"] = prefix + station["station_id"]
            row["station_list"] = json.dumps(stations, ensure_ascii=False)
        elif name == "hop_times.csv":
            row["from_stop_id"] = prefix + row["from_stop_id"]
            row["to_stop_id"] = prefix + row["to_stop_id"]
        elif name == "line_service.csv":
            ends = row["direction"].split(">")
            if len(ends) == 2 and all(end in ids for end in ends):
                row["direction"] = ">".join(prefix + end for end in ends)
    return header, rows


def write_feed(folder, files, as_zip=False, bom=False):
    """Write a feed folder (or zip) from {name: text}; returns its path."""
    if as_zip:
        path = os.path.join(folder, "feed.zip")
        with zipfile.ZipFile(path, "w") as archive:
            for name, text in files.items():
                archive.writestr(name, ("\ufeff" if bom else "") + text)
        return path
    path = os.path.join(folder, "feed")
    os.makedirs(path, exist_ok=True)
    for name, text in files.items():
        with open(os.path.join(path, name), "w", encoding="utf-8", newline="") as handle:
            handle.write(("\ufeff" if bom else "") + text)
    return path
