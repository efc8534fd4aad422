"""Seed compatibility: the seed's examples with the outputs its own
functions give (the vectors of crates/deloop-core/tests/repetition_seed.rs;
the seed's TypeScript is not vendored, its licence being unstated)."""

import deloop

S109_UNIT = "la continuación de un proceso de automatización automático o la de "


def test_s109_spanish_loop():
    text = "El informe describe la migración del archivo y, en resumen, " + S109_UNIT * 40
    out = deloop.clamp(text, seed_compat=True)
    assert out.text == (
        "El informe describe la migración del archivo y, en resumen, "
        "la continuación de un proceso de automatización automático […]"
    )
    assert (out.detector, out.period) == ("word_period", 11)


def test_wifi_sentence_untouched():
    text = "El wifi se configura accediendo a 192.168.1.1. El wifi requiere una contraseña."
    assert deloop.clamp(text, seed_compat=True).text == text


def test_resak_answer_cut_before_the_loop_and_trimmed():
    out = deloop.clamp("Claro: " + "resak-" * 300, seed_compat=True)
    assert out.text == "Claro:"
    assert (out.detector, out.period) == ("substring", 6)
