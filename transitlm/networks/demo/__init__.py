"""The bundled demo data (data/make_demo.py): build (the command and the files), network (the fictional network), cases (a row's trip and label), scenarios (what each prediction exercises).
May import transitlm.networks, transitlm.evaluation, transitlm.io and common."""
