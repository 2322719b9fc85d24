"""The bundled demo data (data/make_demo.py): ``build`` (the command and the
files), ``network`` (the fictional network), ``cases`` (a row's trip and
label) and ``scenarios`` (what each row's prediction exercises).
"""
