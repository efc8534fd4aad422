//! A synthetic held-out-style set for the text guards (issue 12 §2):
//! loops of every missed class and healthy answers with legitimate
//! repetition, in Spanish, English, Chinese and Japanese, generated from a
//! fixed seed. Prints caught/total per class and the healthy answers
//! changed, and asserts at least 97% of loops caught with no healthy
//! answer changed.
//!
//! A loop is caught when the guard keeps the text before the loop and
//! ends no later than `onset + 3 × len(unit) + 200` characters (the
//! real set's rule); a healthy answer passes only if left byte for byte.

use deloop_core::repetition::{clamp, ClampConfig, StreamWatcher};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[self.below(v.len())]
    }
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
}

const LANGS: [&str; 4] = ["es", "en", "zh", "ja"];

fn sentences(lang: &str) -> &'static [&'static str] {
    match lang {
        "es" => &[
            "La temperatura del horno debe mantenerse estable durante toda la cocción.",
            "Antes de empezar, revise que todos los cables estén bien conectados.",
            "El informe anual muestra un crecimiento moderado en las ventas de la región.",
            "Si el problema continúa, reinicie el equipo y vuelva a intentarlo.",
            "Los resultados dependen en gran medida de la calidad de los datos.",
            "Conviene guardar una copia de seguridad antes de actualizar el sistema.",
            "La receta tradicional lleva tomate, ajo, cebolla y un poco de pimentón.",
            "El museo abre de martes a domingo y cierra los días festivos.",
            "Para mejorar el rendimiento, reduzca el número de consultas a la base de datos.",
            "Muchos estudiantes prefieren repasar por la mañana, cuando están descansados.",
            "La política de devoluciones permite cambiar el producto en treinta días.",
            "Cada módulo tiene su propia documentación y sus propias pruebas.",
        ],
        "en" => &[
            "The oven temperature should stay stable for the whole baking time.",
            "Before you start, check that every cable is firmly connected.",
            "The annual report shows moderate sales growth across the region.",
            "If the problem persists, restart the device and try again.",
            "Results depend heavily on the quality of the input data.",
            "It is wise to keep a backup before upgrading the system.",
            "The traditional recipe uses tomato, garlic, onion and a little paprika.",
            "The museum opens Tuesday to Sunday and closes on public holidays.",
            "To improve performance, reduce the number of database queries.",
            "Many students prefer to review in the morning, when they are rested.",
            "The return policy lets you exchange the product within thirty days.",
            "Each module has its own documentation and its own tests.",
        ],
        "zh" => &[
            "烤箱的温度在整个烘烤过程中应保持稳定。",
            "开始之前，请检查所有电缆是否连接牢固。",
            "年度报告显示该地区的销售额温和增长。",
            "如果问题仍然存在，请重新启动设备后再试一次。",
            "结果在很大程度上取决于输入数据的质量。",
            "升级系统之前最好先保留一份备份。",
            "传统做法需要番茄、大蒜、洋葱和少许辣椒粉。",
            "博物馆周二至周日开放，法定节假日闭馆。",
            "为了提高性能，请减少数据库查询的次数。",
            "许多学生喜欢在早上精神好的时候复习。",
            "退货政策允许在三十天内更换商品。",
            "每个模块都有自己的文档和测试。",
        ],
        _ => &[
            "オーブンの温度は焼いている間ずっと安定させてください。",
            "始める前に、すべてのケーブルがしっかり接続されているか確認します。",
            "年次報告書によると、地域全体の売上は緩やかに伸びています。",
            "問題が続く場合は、機器を再起動してもう一度試してください。",
            "結果は入力データの品質に大きく左右されます。",
            "システムを更新する前にバックアップを取っておくと安心です。",
            "伝統的なレシピではトマト、にんにく、玉ねぎ、少しのパプリカを使います。",
            "博物館は火曜日から日曜日まで開館し、祝日は休館です。",
            "性能を上げるには、データベースへの問い合わせを減らしてください。",
            "多くの学生は、頭がすっきりしている朝に復習することを好みます。",
            "返品規定では、三十日以内なら商品を交換できます。",
            "各モジュールには独自のドキュメントとテストがあります。",
        ],
    }
}

fn items(lang: &str) -> &'static [&'static str] {
    match lang {
        "es" => &[
            "Anís",
            "En la sección de configuración, haga clic en \"Recibir\" y confirme.",
            "Comprobar la conexión a internet",
            "Pimienta negra molida",
            "Abrir el menú principal y elegir Opciones",
        ],
        "en" => &[
            "Anise",
            "In the settings section, click \"Receive\" and confirm.",
            "Check the internet connection",
            "Ground black pepper",
            "Open the main menu and choose Options",
        ],
        "zh" => &[
            "八角",
            "在设置部分，点击“接收”并确认。",
            "检查网络连接",
            "黑胡椒粉",
            "打开主菜单并选择选项",
        ],
        _ => &[
            "アニス",
            "設定の項目で「受信」をクリックして確定します。",
            "インターネット接続を確認する",
            "黒こしょう",
            "メインメニューを開いてオプションを選ぶ",
        ],
    }
}

/// A healthy introduction of a few sentences.
fn prose(rng: &mut Rng, lang: &str, n: usize) -> String {
    let pool = sentences(lang);
    let start = rng.below(pool.len());
    let sep = if lang == "zh" || lang == "ja" {
        ""
    } else {
        " "
    };
    (0..n.min(pool.len()))
        .map(|i| pool[(start + i) % pool.len()])
        .collect::<Vec<_>>()
        .join(sep)
}

struct Case {
    class: &'static str,
    lang: &'static str,
    text: String,
    /// Loops: character offset where the loop starts and its unit length.
    onset: Option<(usize, usize)>,
}

fn loop_case(
    class: &'static str,
    lang: &'static str,
    prefix: String,
    body: String,
    unit: usize,
) -> Case {
    let onset = prefix.chars().count();
    Case {
        class,
        lang,
        text: format!("{prefix}{body}"),
        onset: Some((onset, unit)),
    }
}

fn loops(rng: &mut Rng) -> Vec<Case> {
    let mut out = Vec::new();
    for round in 0..6 {
        for lang in LANGS {
            let k = rng.range(1, 4);
            let intro = format!("{}\n\n", prose(rng, lang, k));
            // Counted list items with the same body.
            let item = rng.pick(items(lang));
            let k0 = rng.range(1, 60);
            let n = rng.range(8, 40);
            let body: String = (k0..k0 + n).map(|k| format!("{k}. {item}\n")).collect();
            let unit = format!("{k0}. {item}\n").chars().count();
            out.push(loop_case("counted items", lang, intro.clone(), body, unit));
            // Empty markers counting on.
            let k0 = rng.range(20, 80);
            let lead = format!("{intro}1. {}\n2. {}\n", items(lang)[2], items(lang)[3]);
            let body: String = (k0..k0 + rng.range(12, 60))
                .map(|k| format!("{k}.\n"))
                .collect();
            out.push(loop_case("empty markers", lang, lead, body, 4));
            // Two items alternating under rising numbers.
            let (a, b) = (items(lang)[round % 5], items(lang)[(round + 2) % 5]);
            let body: String = (1..rng.range(14, 40))
                .map(|k| format!("{k}. {}\n", if k % 2 == 0 { a } else { b }))
                .collect();
            out.push(loop_case(
                "alternating items",
                lang,
                intro.clone(),
                body,
                a.chars().count() + b.chars().count() + 8,
            ));
            // Counters inline: times, glued counters.
            let k0 = rng.range(1, 40);
            let body: String = match round % 3 {
                0 => (k0..k0 + 30)
                    .map(|k| format!("{k}:00 PM: {k}:00 PM: "))
                    .collect(),
                1 => (k0..k0 + 40).map(|k| format!("assistant{k} ")).collect(),
                _ => (k0..k0 + 30).map(|k| format!("Anise {k}. ")).collect(),
            };
            out.push(loop_case(
                "counters",
                lang,
                format!("{} ", prose(rng, lang, 2)),
                body,
                20,
            ));
            // A sentence coming back with a word or two changed.
            let s = sentences(lang)[rng.below(12)];
            let variants = sentence_variants(lang, s);
            let body: String = (0..rng.range(8, 20))
                .map(|_| {
                    variants[rng.below(variants.len())].clone()
                        + if lang == "zh" || lang == "ja" {
                            ""
                        } else {
                            " "
                        }
                })
                .collect();
            let unit = variants[0].chars().count() + 10;
            out.push(loop_case(
                "near-duplicate sentences",
                lang,
                format!("{} ", prose(rng, lang, 2)),
                body,
                unit,
            ));
        }
        // Units of 13 to 64 characters without white space.
        let units = [
            "https://example.com/",
            "/api/v1/users",
            "resak-kasra-tomo-",
            "_advanced_settings",
            "https://docs.rs/serde/latest/",
            "../../etc/passwd/",
            "ネットワーク設定ネットワーク確認/",
            "网络设置网络检查网络重启/",
        ];
        for (i, u) in units.iter().enumerate() {
            let lang = LANGS[i % 4];
            let n = rng.range(6, 30);
            let cut = rng.below(u.chars().count());
            let mut body = u.repeat(n);
            body.extend(u.chars().take(cut));
            let intro = format!("{} ", prose(rng, lang, 2));
            out.push(loop_case(
                "long units",
                lang,
                intro,
                body,
                u.chars().count(),
            ));
        }
        // Floods in running text.
        let floods = [
            "😂", "ja", "ha", "0", "<br>", "哈", "w", "！", "ね", "🔥🔥", "jeje",
        ];
        for (i, f) in floods.iter().enumerate() {
            let lang = LANGS[(i + round) % 4];
            let n = rng.range(200, 600) / f.chars().count();
            let intro = format!("{} ", prose(rng, lang, 2));
            out.push(loop_case("floods", lang, intro, f.repeat(n), 100));
        }
    }
    for round in 0..5 {
        for lang in LANGS {
            // JSON answers with escaped newlines, escaped emoji, chains.
            let s = sentences(lang)[rng.below(12)];
            let intro = format!("{{\"answer\": \"{}\\n", prose(rng, lang, 2));
            let body = match round % 3 {
                0 => format!("{s}\\n").repeat(rng.range(8, 20)),
                1 => "\\ud83d\\ude02".repeat(rng.range(20, 60)),
                _ => format!("{}\\n", items(lang)[0]).repeat(rng.range(20, 40)),
            };
            out.push(loop_case(
                "json strings",
                lang,
                intro,
                body + "\"}",
                s.chars().count() + 2,
            ));
            // Code fences: a block of lines repeated.
            let intro = format!("{}\n\n```python\nimport os\n\n", prose(rng, lang, 2));
            let block = match round % 3 {
                0 => "def handler(event):\n    print(\"processing\", event)\n    return True\n\n"
                    .to_string(),
                1 => "    x = compute(x)\n    log.info(\"step done\")\n".to_string(),
                _ => format!("# {}\nresult = run()\n", items(lang)[3]),
            };
            let body = block.repeat(rng.range(6, 20));
            let unit = block.chars().count();
            out.push(loop_case("code fences", lang, intro, body, unit));
            // Long tails: a long unit repeated to the end, cut mid-unit.
            let pool = sentences(lang);
            let k = rng.range(3, 8);
            let unit_text: String = (0..k)
                .map(|i| pool[(round + i * 5) % pool.len()])
                .collect::<Vec<_>>()
                .join(if lang == "zh" || lang == "ja" {
                    ""
                } else {
                    " "
                })
                + " ";
            let long_intro = format!("{}\n\n{}\n\n", prose(rng, lang, 6), prose(rng, lang, 5));
            let copies = rng.range(3, 5);
            let mut body = unit_text.repeat(copies);
            let cut: String = unit_text
                .chars()
                .take(rng.below(unit_text.chars().count()))
                .collect();
            body.push_str(&cut);
            out.push(loop_case(
                "long tails",
                lang,
                long_intro,
                body,
                unit_text.chars().count(),
            ));
        }
    }
    out
}

/// A sentence with small changes: a word inserted, one dropped.
fn sentence_variants(lang: &str, s: &str) -> Vec<String> {
    let mut v = vec![s.to_string()];
    if lang == "zh" || lang == "ja" {
        let chars: Vec<char> = s.chars().collect();
        let mid = chars.len() / 2;
        let ins = if lang == "zh" { "也" } else { "も" };
        v.push(format!(
            "{}{ins}{}",
            chars[..mid].iter().collect::<String>(),
            chars[mid..].iter().collect::<String>()
        ));
        v.push(
            chars[..chars.len() - 2]
                .iter()
                .chain(chars[chars.len() - 1..].iter())
                .collect(),
        );
    } else {
        let words: Vec<&str> = s.split(' ').collect();
        let ins = if lang == "es" { "también" } else { "also" };
        let mut a = words.clone();
        a.insert(2, ins);
        v.push(a.join(" "));
        let mut b = words.clone();
        b.remove(words.len() / 2);
        v.push(b.join(" "));
    }
    v
}

fn healthy(rng: &mut Rng) -> Vec<Case> {
    let mut out = Vec::new();
    let h = |class, lang, text: String| Case {
        class,
        lang,
        text,
        onset: None,
    };
    for round in 0..5 {
        for lang in LANGS {
            out.push(h(
                "prose",
                lang,
                format!("{}\n\n{}", prose(rng, lang, 6), prose(rng, lang, 6)),
            ));
            // Numbered steps whose content differs.
            let pool = sentences(lang);
            let steps: String = (0..rng.range(6, 12))
                .map(|i| format!("{}. {}\n", i + 1, pool[(i * 7 + round) % pool.len()]))
                .collect();
            out.push(h(
                "numbered steps",
                lang,
                format!("{}\n\n{steps}", prose(rng, lang, 1)),
            ));
            // Numbers as content.
            let n = rng.range(20, 40);
            let seq: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
            out.push(h(
                "number runs",
                lang,
                format!("{} {}.", prose(rng, lang, 1), seq.join(", ")),
            ));
            let lines: String = (1..=n).map(|i| format!("{i}\n")).collect();
            out.push(h(
                "number runs",
                lang,
                format!("{}\n\n{lines}", prose(rng, lang, 1)),
            ));
            // Tables of sequential ids.
            let rows: String = (1..=rng.range(10, 30))
                .map(|i| {
                    format!(
                        "| {i} | user_{i:03} | {} | active |\n",
                        ["es", "en", "zh", "ja"][i % 4]
                    )
                })
                .collect();
            out.push(h(
                "tables",
                lang,
                format!(
                    "{}\n\n| id | name | lang | state |\n|----|------|------|-------|\n{rows}",
                    prose(rng, lang, 1)
                ),
            ));
            // Dates in a log, in and out of a fence.
            let log: String = (0..rng.range(10, 40))
                .map(|i| {
                    format!(
                        "2024-03-{:02} 10:{:02}:{:02} INFO worker {} finished job {} in {} ms\n",
                        1 + i / 20,
                        i % 60,
                        (i * 7) % 60,
                        i % 4,
                        1000 + i * 3,
                        20 + (i * 13) % 90
                    )
                })
                .collect();
            if round % 2 == 0 {
                out.push(h(
                    "logs",
                    lang,
                    format!("{}\n\n```\n{log}```\n", prose(rng, lang, 1)),
                ));
            } else {
                out.push(h("logs", lang, format!("{}\n\n{log}", prose(rng, lang, 1))));
            }
            // Dividers, table rules, padding, short laughs.
            let div =
                ["-", "=", "─", "*", "#", "~", "_", "━"][rng.below(8)].repeat(rng.range(20, 100));
            out.push(h(
                "layout",
                lang,
                format!(
                    "{}\n{div}\n{}\n{div}\n| a | b |\n|{}|{}|\n| x{}| y |\n",
                    prose(rng, lang, 2),
                    prose(rng, lang, 2),
                    "-".repeat(40),
                    "-".repeat(40),
                    " ".repeat(60)
                ),
            ));
            let laugh = [
                "jaja",
                "jajaja",
                "haha",
                "jejeje",
                "哈哈哈",
                "ｗｗｗ",
                "😂😂😂",
                "lol lol",
            ][rng.below(8)];
            out.push(h(
                "short laughs",
                lang,
                format!("{} {laugh} {}", prose(rng, lang, 2), prose(rng, lang, 2)),
            ));
            // Repetitive data in code.
            let zeros = "    0, 0, 0, 0, 0, 0, 0, 0,\n".repeat(rng.range(10, 60));
            out.push(h(
                "code data",
                lang,
                format!(
                    "{}\n\n```c\nstatic const int table[] = {{\n{zeros}}};\n```\n",
                    prose(rng, lang, 1)
                ),
            ));
            let dump: String = (0..rng.range(10, 40)).map(|i| format!("{:08x}: 00 00 00 00 ff ff ff ff 00 00 00 00 ff ff ff ff  ................\n", i * 16)).collect();
            out.push(h(
                "code data",
                lang,
                format!("{}\n\n```\n{dump}```\n", prose(rng, lang, 1)),
            ));
            // Blobs: hex, base64 with zero runs, hashes, UUIDs, checksums.
            let mut hex = String::new();
            for _ in 0..rng.range(4, 16) {
                hex.push_str(&format!("{:016x}", rng.next()));
            }
            let b64 = format!("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ{}AAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==", "A".repeat(rng.range(20, 300)));
            let uuids: String = (0..rng.range(10, 30))
                .map(|_| {
                    let (a, b) = (rng.next(), rng.next());
                    format!(
                        "- {:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}\n",
                        a >> 32,
                        a & 0xffff,
                        b & 0xfff,
                        (b >> 12) & 0xfff,
                        b >> 16
                    )
                })
                .collect();
            let sums: String = (0..rng.range(10, 30))
                .map(|i| format!("{:016x}{:016x}  file_{i}.tar.gz\n", rng.next(), rng.next()))
                .collect();
            let zero_hash = format!("0x{}", "0".repeat(rng.range(64, 128)));
            let blob = match round % 5 {
                0 => hex,
                1 => b64,
                2 => uuids,
                3 => sums,
                _ => zero_hash,
            };
            out.push(h(
                "blobs",
                lang,
                format!("{}\n\n{blob}\n", prose(rng, lang, 1)),
            ));
            // JSON answers with escaped newlines.
            let json = format!(
                "{{\"answer\": \"{}\\n\\n{}\\n- {}\\n- {}\"}}",
                prose(rng, lang, 2),
                prose(rng, lang, 2),
                items(lang)[2],
                items(lang)[3]
            );
            out.push(h("json", lang, json));
            // A poem with a refrain that comes back after each verse.
            let refrain = sentences(lang)[round % 12];
            let poem: String = (0..4)
                .map(|i| {
                    format!(
                        "{}\n{}\n{refrain}\n\n",
                        sentences(lang)[(i * 3 + 1) % 12],
                        sentences(lang)[(i * 3 + 2) % 12]
                    )
                })
                .collect();
            out.push(h("refrains", lang, poem));
        }
    }
    out
}

fn caught(case: &Case, out: &str) -> bool {
    let (onset, unit) = case.onset.expect("a loop");
    let before: String = case.text.chars().take(onset).collect();
    out.starts_with(before.trim_end()) && out.chars().count() <= onset + 3 * unit + 200
}

#[test]
fn synthetic_set_meets_the_bar() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let loops = loops(&mut rng);
    let healthy = healthy(&mut rng);
    assert!(
        loops.len() >= 200 && healthy.len() >= 200,
        "{} loops, {} healthy",
        loops.len(),
        healthy.len()
    );
    let config = ClampConfig::default();
    let mut classes: Vec<(&str, usize, usize)> = Vec::new();
    let mut hit_total = 0;
    for case in &loops {
        let out = clamp(&case.text, &config);
        let ok = caught(case, &out.text);
        hit_total += usize::from(ok);
        if !ok {
            println!(
                "missed [{}/{}] {:?}: {:?}",
                case.class,
                case.lang,
                out.report(),
                case.text.chars().take(300).collect::<String>()
            );
        }
        match classes.iter_mut().find(|c| c.0 == case.class) {
            Some(c) => {
                c.1 += usize::from(ok);
                c.2 += 1;
            }
            None => classes.push((case.class, usize::from(ok), 1)),
        }
        // The watcher agrees with the batch guard on where to cut.
        let mut w = StreamWatcher::new(config.clone());
        let cut = case
            .text
            .as_bytes()
            .chunks(61)
            .find_map(|c| w.feed(c))
            .or_else(|| w.finish());
        if let Some(cut) = cut {
            let prefix =
                std::str::from_utf8(&case.text.as_bytes()[..cut.detected_at]).expect("boundary");
            assert_eq!(
                clamp(prefix, &config).report().map(|r| r.keep_bytes),
                Some(cut.keep_bytes)
            );
        }
    }
    for (class, hit, total) in &classes {
        println!("loops {class}: {hit}/{total}");
    }
    let mut changed = Vec::new();
    for case in &healthy {
        let out = clamp(&case.text, &config);
        if out.text != case.text {
            println!(
                "changed healthy [{}/{}] {:?}: {:?}",
                case.class,
                case.lang,
                out.report(),
                case.text.chars().take(300).collect::<String>()
            );
            changed.push(case.class);
        }
    }
    println!(
        "synthetic: loops caught {hit_total}/{} ({:.1}%), healthy changed {}/{}",
        loops.len(),
        100.0 * hit_total as f64 / loops.len() as f64,
        changed.len(),
        healthy.len()
    );
    assert!(
        hit_total * 100 >= loops.len() * 97,
        "caught {hit_total}/{}",
        loops.len()
    );
    assert!(changed.is_empty(), "healthy answers changed: {changed:?}");
}
