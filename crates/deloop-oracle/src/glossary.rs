//! Spanish questions over English documentation: a bilingual glossary.
//!
//! deloop's documentation (and most documentation a user indexes) is in
//! English, while questions come in Spanish too. Lexical search cannot match
//! `bucle` with `loop`, and the local embedder (all-MiniLM-L6-v2) is
//! English-only. So a question detected as Spanish
//! ([`crate::detect_language`]) is also rendered in English, word by word,
//! with a glossary of about 300 entries: the vocabulary of software
//! documentation (loops, streams, keys, files, servers, errors…) and the
//! verbs questions use (`usar`, `cambiar`, `activar`, `devolver`…). This is
//! query translation by dictionary, a standard cross-language retrieval
//! technique; it is not tied to any document or question.
//!
//! Matching, on lowercase words without accents (`índice` = `indice`):
//! * multi-word phrases first (`código de salida` → `exit code`);
//! * then function words are skipped ([`deloop_index::is_stopword`]), and so
//!   are words that are themselves English terms of the glossary (`stream`,
//!   `guard`, `test`: a Spanish question often names things in English);
//! * a plain form matches itself and its plural (`-s`, `-es`);
//! * a stem (written with `*`) matches itself plus an ending of at most five
//!   letters (`configur*` matches `configuro`, `configuración`); the
//!   longest matching stem wins, so `pasaje*` beats `pas*`.
//!
//! The retrieval uses both renderings: the English terms are OR-ed into the
//! lexical query after the question's own words, and the query vector is
//! the mean of the question's and the English rendering's vectors, so a
//! multilingual embedder or Spanish documents lose nothing.
//!
//! ```
//! use deloop_oracle::glossary::translate_question;
//! let t = translate_question("¿Qué significa el código de salida 3?").unwrap();
//! assert_eq!(t.terms, ["mean", "meaning", "exit", "code"]);
//! assert_eq!(t.rendering, "mean meaning exit code 3");
//! assert!(translate_question("What does exit code 3 mean?").is_none());
//! ```

use std::collections::HashMap;
use std::sync::OnceLock;

use deloop_index::{fold_accents, is_stopword};

use crate::language::{detect_language, Language};

/// The glossary: `Spanish forms|English terms`, one entry a line. A form
/// ending in `*` is a stem; a form with spaces is a phrase.
const GLOSSARY: &str = "\
bucle*|loop
repeti*|repeat repetition
repetid*|repeated
repit*|repeat
cort*|cut
detien* deten*|stop
parar pare paran parando paro|stop
frenar fren*|stop
evit*|avoid prevent
flujo*|stream
transmision* emision*|stream streaming
generar genera generan generado generada generacion generaciones|generate generation
salida*|output exit
entrada*|input
codigo*|code
palabra*|word
texto*|text
frase* oracion*|sentence
subcadena*|substring
cadena*|string
caracter caracteres|character
linea*|line
copia*|copy copies
seguid* consecutiv*|consecutive row
unidad*|unit
periodo*|period
marcador*|marker
guarda* guardian*|guard
proteccion* proteg*|protection healthy
falso* falsa*|false
positivo*|positive
legitim*|legitimate healthy
tabla*|table
celda*|cell
fila*|row
columna*|column
bloque*|block
valla*|fence
respuesta*|answer reply response
respond* contest*|answer reply
pregunta* pregunt*|question ask
modelo*|model
campo*|field
clave*|key
valor*|value
objeto*|object
arreglo* matriz*|array
anidad* anidamiento*|nested depth
profundidad*|depth
comilla*|quote
escap*|escape
roto rota rotos rotas|broken
romp*|break broken
invalid*|invalid
valid*|valid
repar*|repair
rescat*|rescue
recuper*|recover retrieve retrieved
trunc*|truncated truncate
limite*|limit
pensamiento*|think thinking
quit*|remove strip
elimin* borr*|remove delete
limpi*|clean strip
herramienta*|tool
llamada* llam*|call
agente*|agent
sesion*|session
ejecucion*|run
ejecut*|run execute
historial* historia*|history
resultado*|result
veredicto*|verdict
umbral*|threshold
aviso* advertencia*|warning
critic*|critical
bloqu*|block blocked
detector*|detector
detect*|detect detection
deteccion*|detection detect
perfil*|profile
estrict*|strict
huella*|fingerprint
sondeo* sonde*|poll
consult*|query
cambi*|change
distint* diferent*|different
diferencia*|difference
mism*|same
igual* identic*|identical same
exactamente exact*|exactly exact
compar*|compare
transcripcion* transcrip*|transcript
formato*|format
mensaje*|message
usuario*|user
asistente*|assistant
compactacion* compact*|compaction
resumen*|summary
escenario*|scenario
configuracion* configur*|configure configuration config
ajuste* ajust*|setting settings config
opcion*|option
bandera*|flag
parametro*|parameter
argumento*|argument
variable*|variable
entorno*|environment
ruta*|path route
base*|base database
datos|data
fichero* archivo*|file
carpeta* directorio*|directory folder
indice*|index
busqueda* busc*|search
fragment* trozo* pedazo*|chunk chunking split
divid* divis* troce* partir|split
encabezado* cabecera* titulo*|heading header title
seccion*|section
solap*|overlap
tamano*|size
longitud*|length
lexic*|lexical
hibrid*|hybrid
vectorial*|vector
semantic*|semantic vector
puntuacion*|score
clasific*|rank
fusion*|fusion
peso*|weight
incrust*|embedding embedder
embebid* integrad* incorporad*|embedded
modo*|mode
ayuda*|help
tutor*|tutor
oraculo*|oracle
explic*|explain
paso*|step
dialogo* conversacion*|dialogue conversation history
cita*|citation cite
citad*|cited citation
pasaje*|passage
fuente*|source
document*|document documentation docs
pagina*|page
ejemplo*|example
instal*|install setup
descarg*|download
paquete*|package
local*|local
proveedor*|provider
servidor*|server
servi*|serve server
cliente*|client
escritorio*|desktop
conect*|connect
conexion*|connection
punto*|point
evento*|event
peticion* solicitud*|request
autenticacion* autentic*|auth authentication
autoriz*|authorization auth
puerto*|port
escuch*|listen
direccion*|address
arranc* inici*|start
apag*|shutdown
senal*|signal
salud*|health
listo*|ready
metrica*|metrics
registro* log*|log logs
error*|error failure
fallo fallos falla fallan fallar fallado fallida fallido fallidas fallidos|fail failed failure
tiempo*|time timeout
espera* esper*|wait
reintent*|retry
plazo*|deadline timeout
rechaz*|refuse refusal
negativa*|refusal
segur*|safety
degrad*|degraded
temperatura*|temperature
memoria*|memory
velocidad*|speed
rapido* rapida*|fast
lento* lenta*|slow
prueba*|test
rendimiento*|performance speed
idioma* lengua*|language
espanol*|spanish
ingles*|english
activ* habilit*|enable
desactiv* deshabilit*|disable
us* utiliz*|use
signific*|mean meaning
devuel* devolv*|return
acept*|accept
lee* leer* lect*|read
escrib*|write
imprim* muestr* mostr*|print show
crea* cre*|create build
constru*|build
compil*|build compile
depend*|dependency
pas*|happens pass
ocurr* suced*|happens
funcion*|work function
comando* orden*|command
nuevo* nueva*|new
propio* propia*|own
dej*|let allow leave
necesit*|need
pon* pong*|set put
concret* especific*|specific
vari*|several multiple
multipl*|multiple
apunt*|point refer
mand* envi*|send
pid* pedi* pedir|ask request
parte*|part
obten* obtien* consig*|get obtain
encontr* encuentr* hall*|find
ver veo ves vemos|see show
guardar almacen*|save store
carg*|load
abr* abiert*|open
cerr* cierr*|close
anad* agreg*|add
mov* muev*|move
salt* omit*|skip
ignor*|ignore
sigu*|follow continue
termin* acab* fin final*|end finish
empez* empiez* comienz*|start begin
salir sale salen salio|exit
entrar entra entran|enter
tard*|slow time
cuesta cuestan costar coste costo|cost
gast*|spend cost
medir mide miden medido medida medicion|measure measured
cifra* numero*|number figure
grand*|large big
pequen*|small
larg*|long
vacio* vacia*|empty
lleno* llena*|full
entero* entera*|whole
todo|all every
nunca|never
siempre|always
solo sola solamente|only
primer*|first
ultim*|last
siguiente*|next
anterior*|previous earlier
antiguo* viej*|old
sabe* sab*|know
quier* quer*|want
pued* pod*|can
debo debe deben deberia debemos|must should
hac* hag* hech*|do make
toma* tom*|take
dar da dan das dando|give
codigo de salida|exit code
codigos de salida|exit code
clave de api|api key
claves de api|api key
base de datos|database
linea de comandos|command line
variable de entorno|environment variable
variables de entorno|environment variable
tiempo de espera|timeout
sin conexion|offline
falso positivo|false positive
falsos positivos|false positive
bloque de codigo|code block
bloques de codigo|code block
llamada a herramienta|tool call
llamadas a herramientas|tool call
";

/// Longest ending a stem accepts, in characters.
const MAX_ENDING: usize = 5;

#[derive(Debug, Default)]
struct Glossary {
    /// Plain forms.
    words: HashMap<String, Vec<&'static str>>,
    /// Stems (the `*` removed).
    stems: HashMap<String, Vec<&'static str>>,
    /// Phrases, as their words.
    phrases: HashMap<Vec<String>, Vec<&'static str>>,
    /// Every English term, to leave English words of a question alone.
    english: std::collections::HashSet<&'static str>,
}

fn glossary() -> &'static Glossary {
    static GLOSSARY_TABLE: OnceLock<Glossary> = OnceLock::new();
    GLOSSARY_TABLE.get_or_init(|| {
        let mut g = Glossary::default();
        for line in GLOSSARY.lines().filter(|l| !l.trim().is_empty()) {
            let Some((forms, english)) = line.split_once('|') else {
                continue;
            };
            let terms: Vec<&'static str> = english.split_whitespace().collect();
            g.english.extend(terms.iter().copied());
            let forms = fold_accents(forms);
            if !forms.contains('*') && forms.trim().contains(' ') {
                let key = forms.split_whitespace().map(str::to_owned).collect();
                g.phrases.entry(key).or_default().extend(&terms);
                continue;
            }
            for form in forms.split_whitespace() {
                let (map, key) = match form.strip_suffix('*') {
                    Some(stem) => (&mut g.stems, stem),
                    None => (&mut g.words, form),
                };
                let entry = map.entry(key.to_owned()).or_default();
                for t in &terms {
                    if !entry.contains(t) {
                        entry.push(t);
                    }
                }
            }
        }
        g
    })
}

impl Glossary {
    /// The English terms for one word (lowercase, without accents).
    fn word(&self, w: &str) -> &[&'static str] {
        if self.english.contains(w) {
            return &[];
        }
        let plural = [w.strip_suffix("es"), w.strip_suffix('s')];
        for form in std::iter::once(Some(w)).chain(plural).flatten() {
            if let Some(t) = self.words.get(form) {
                return t;
            }
        }
        // The prefixes that leave at most MAX_ENDING characters, longest
        // first: the last MAX_ENDING + 1 character boundaries.
        let mut ends: Vec<usize> = w
            .char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(w.len()))
            .collect();
        let keep = ends.len().saturating_sub(MAX_ENDING + 1);
        ends.drain(..keep);
        ends.iter()
            .rev()
            .filter(|&&i| i > 0)
            .find_map(|&i| self.stems.get(&w[..i]))
            .map_or(&[], Vec::as_slice)
    }
}

/// A Spanish question rendered in English.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translation {
    /// The English terms of the translated words and phrases, in question
    /// order, each once.
    pub terms: Vec<String>,
    /// The question's content words in order, each translated word or
    /// phrase replaced by its first one or two English terms (for the
    /// query vector).
    pub rendering: String,
}

/// Words of a question rendered in English at most.
const MAX_WORDS: usize = 64;

/// The English rendering of `question` when it is Spanish
/// ([`detect_language`]) and the glossary knows at least one of its words;
/// `None` otherwise.
pub fn translate_question(question: &str) -> Option<Translation> {
    if detect_language(question) != Language::Es {
        return None;
    }
    let g = glossary();
    let words: Vec<String> = question
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(MAX_WORDS)
        .map(fold_accents)
        .collect();
    let mut terms: Vec<String> = Vec::new();
    let mut rendering: Vec<String> = Vec::new();
    let mut translated = false;
    let mut i = 0;
    while i < words.len() {
        let phrase = (2..=4).rev().find_map(|n| {
            words
                .get(i..i + n)
                .and_then(|p| g.phrases.get(p))
                .map(|t| (n, t.as_slice()))
        });
        let (used, english) = match phrase {
            Some((n, t)) => (n, t),
            None if is_stopword(&words[i]) => {
                i += 1;
                continue;
            }
            None => (1, g.word(&words[i])),
        };
        if english.is_empty() {
            rendering.push(words[i].clone());
        } else {
            translated = true;
            rendering.push(
                english
                    .iter()
                    .take(2)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(" "),
            );
            for t in english.iter().flat_map(|t| t.split_whitespace()) {
                if !terms.iter().any(|x| x == t) && !words.iter().any(|w| w == t) {
                    terms.push(t.to_owned());
                }
            }
        }
        i += used;
    }
    translated.then(|| Translation {
        terms,
        rendering: rendering.join(" "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_parses_and_stems_are_not_too_short() {
        for line in GLOSSARY.lines().filter(|l| !l.trim().is_empty()) {
            let (forms, english) = line.split_once('|').expect(line);
            assert!(!english.trim().is_empty(), "{line}");
            assert_eq!(forms, forms.to_lowercase(), "{line}");
            assert_eq!(
                fold_accents(forms),
                forms,
                "{line}: write forms without accents"
            );
            for f in forms.split_whitespace() {
                if let Some(stem) = f.strip_suffix('*') {
                    assert!(stem.chars().count() >= 2, "{line}");
                }
            }
        }
        let g = glossary();
        assert!(g.words.len() + g.stems.len() > 250);
        assert!(g.phrases.len() >= 10);
    }

    #[test]
    fn words_plurals_stems_and_phrases() {
        let t = translate_question("¿Cómo detengo los bucles en el flujo?").unwrap();
        assert_eq!(t.terms, ["stop", "loop", "stream"]);
        assert_eq!(t.rendering, "stop loop stream");
        // The longest stem wins; English words are left alone.
        let t = translate_question("¿Qué pasa con los pasajes del guard?").unwrap();
        assert_eq!(t.terms, ["happens", "pass", "passage"]);
        assert_eq!(t.rendering, "happens pass passage guard");
        // A phrase beats its words.
        // (Terms already in the question are not repeated.)
        let t = translate_question("¿Dónde pongo la clave de API?").unwrap();
        assert_eq!(t.terms, ["set", "put", "key"]);
        assert_eq!(t.rendering, "set put api key");
        // Accents do not matter; unknown words are kept.
        let t = translate_question("¿Cómo configuro el índice de Ollama?").unwrap();
        assert_eq!(t.rendering, "configure configuration index ollama");
    }

    #[test]
    fn english_and_unknown_questions_are_not_translated() {
        assert!(translate_question("How do I stop a looping stream?").is_none());
        assert!(translate_question("¿Qué es zzz?").is_none());
        assert!(translate_question("").is_none());
        assert!(translate_question("¿¡ñ!?").is_none());
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn never_panics_and_stays_bounded(q in "\\PC{0,400}") {
                if let Some(t) = translate_question(&q) {
                    prop_assert!(t.terms.len() <= MAX_WORDS * 3);
                    prop_assert!(!t.rendering.is_empty());
                }
            }
        }
    }
}
