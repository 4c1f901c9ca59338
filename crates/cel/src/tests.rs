//! The environment's libraries, table by table (cases from upstream's library tests and
//! cel-go's extension tests), and the declarations check.

use super::*;
use cel::Value;

fn eval(expression: &str) -> Result<Value, String> {
    let program = compile(expression, &["x"]).map_err(|e| e.to_string())?;
    let mut context = root().new_inner_scope();
    context.add_variable_from_value("x", Value::Int(7));
    program.execute(&context).map_err(|e| e.to_string())
}

/// Each expression must evaluate to `true`.
fn all_true(table: &[&str]) {
    for expression in table {
        assert_eq!(eval(expression), Ok(Value::Bool(true)), "{expression}");
    }
}

/// Each expression must fail to evaluate (or compile) with a message containing the text.
fn all_fail(table: &[(&str, &str)]) {
    for (expression, part) in table {
        match eval(expression) {
            Err(message) => assert!(message.contains(part), "{expression}: {message}"),
            Ok(value) => panic!("{expression}: evaluated to {value:?}"),
        }
    }
}

#[test]
fn every_library_function_registers() {
    assert!(LIBRARY.refused.is_empty(), "{:?}", LIBRARY.refused);
}

#[test]
fn strings_extension() {
    all_true(&[
        "'abc'.charAt(1) == 'b'",
        "'tacocat'.charAt(7) == ''",
        "'tacocat'.indexOf('co') == 2",
        "'tacocat'.indexOf('a', 3) == 5",
        "'tacocat'.lastIndexOf('a') == 5",
        "'tacocat'.lastIndexOf('none') == -1",
        "'TacoCat'.lowerAscii() == 'tacocat'",
        "'TacoCat'.upperAscii() == 'TACOCAT'",
        "'hello hello'.replace('he', 'we') == 'wello wello'",
        "'hello hello'.replace('he', 'we', 1) == 'wello hello'",
        "'hello hello hello'.split(' ') == ['hello', 'hello', 'hello']",
        "'hello hello hello'.split(' ', 2) == ['hello', 'hello hello']",
        "'tacocat'.substring(4) == 'cat'",
        "'tacocat'.substring(0, 4) == 'taco'",
        "'  \\ttrim\\t  '.trim() == 'trim'",
        "['hello', 'mellow'].join() == 'hellomellow'",
        "['hello', 'mellow'].join(' ') == 'hello mellow'",
        "strings.quote('verbatim') == '\"verbatim\"'",
        "'%s is %d'.format(['x', 3]) == 'x is 3'",
        "'NVIDIA A100-SXM4-40GB'.lowerAscii().matches('^.*a100.*$')",
    ]);
    all_fail(&[("'tacocat'.substring(40)", "index out of range")]);
}

#[test]
fn kubernetes_lists_library() {
    all_true(&[
        "[1, 2, 3].isSorted()",
        "![3, 1].isSorted()",
        "['a', 'b'].isSorted()",
        "[].isSorted()",
        "[1, 2, 3].sum() == 6",
        "[1.5, 2.5].sum() == 4.0",
        "[].sum() == 0",
        "[3, 1, 2].min() == 1",
        "[3, 1, 2].max() == 3",
        "['b', 'a'].min() == 'a'",
        "[1, 2, 2, 3].indexOf(2) == 1",
        "[1, 2, 2, 3].lastIndexOf(2) == 2",
        "[1, 2].indexOf(9) == -1",
        "['a', 'b'].indexOf('b') == 1",
        // The strings extension's indexOf still serves strings.
        "'abcb'.lastIndexOf('b') == 3",
    ]);
    all_fail(&[
        ("[].min()", "min called on empty list"),
        ("[].max()", "max called on empty list"),
        ("[1, 'a'].isSorted()", "cannot compare"),
    ]);
}

#[test]
fn sets_extension_and_bind() {
    all_true(&[
        "sets.contains([1, 2, 3], [3, 1])",
        "!sets.contains([1], [2])",
        "sets.equivalent([1, 2], [2, 1, 1])",
        "sets.intersects([1, 2], [2, 5])",
        "!sets.intersects([1], [])",
        "cel.bind(a, 'hello', a + a) == 'hellohello'",
        "cel.bind(a, 2, cel.bind(b, a * 3, a + b)) == 8",
        "cel.bind(v, x, v == 7)",
    ]);
}

#[test]
fn kubernetes_regex_library() {
    all_true(&[
        "'abc 123'.find('[0-9]+') == '123'",
        "'abc'.find('[0-9]+') == ''",
        "'123 abc 456'.findAll('[0-9]+') == ['123', '456']",
        "'123 abc 456'.findAll('[0-9]+', 1) == ['123']",
        "'123 abc 456'.findAll('[0-9]+', -1) == ['123', '456']",
        "'abc'.findAll('[0-9]+') == []",
    ]);
    all_fail(&[("'abc'.find('[')", "invalid regular expression")]);
}

#[test]
fn kubernetes_url_library() {
    all_true(&[
        "isURL('https://user:pass@example.com:80/path?query=val#fragment') == true",
        "isURL('/absolute-path')",
        "!isURL('../relative-path')",
        "!isURL('example.com')",
        "url('https://example.com:80/').getScheme() == 'https'",
        "url('https://example.com:80/').getHost() == 'example.com:80'",
        "url('https://example.com:80/').getHostname() == 'example.com'",
        "url('https://example.com:80/').getPort() == '80'",
        "url('https://example.com/').getPort() == ''",
        "url('https://[::1]:80/').getHost() == '[::1]:80'",
        "url('https://[::1]:80/').getHostname() == '::1'",
        "url('https://example.com/path with spaces/').getEscapedPath() == '/path%20with%20spaces/'",
        "url('https://example.com/path').getEscapedPath() == '/path'",
        "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}",
        "url('https://example.com/').getQuery() == {}",
        "url('/path').getScheme() == ''",
    ]);
    all_fail(&[("url('../relative')", "URL parse error")]);
}

#[test]
fn kubernetes_ip_and_cidr_libraries() {
    all_true(&[
        "isIP('1.2.3.4')",
        "isIP('2001:db8::abcd')",
        "!isIP('1.2.3.4/24')",
        "!isIP('::ffff:1.2.3.4')",
        "!isIP('01.2.3.4')",
        "ip('1.2.3.4').family() == 4",
        "ip('::1').family() == 6",
        "ip('127.0.0.1').isLoopback()",
        "ip('0.0.0.0').isUnspecified()",
        "ip('224.0.0.1').isLinkLocalMulticast()",
        "ip('ff02::1').isLinkLocalMulticast()",
        "ip('169.254.169.254').isLinkLocalUnicast()",
        "ip('fe80::1').isLinkLocalUnicast()",
        "ip('192.168.0.1').isGlobalUnicast()",
        "!ip('255.255.255.255').isGlobalUnicast()",
        "ip.isCanonical('2001:db8::abcd')",
        "!ip.isCanonical('2001:DB8::ABCD')",
        "ip('1.2.3.4') == ip('1.2.3.4')",
        "string(ip('1.2.3.4')) == '1.2.3.4'",
        "isCIDR('192.168.0.0/24')",
        "!isCIDR('192.168.0.0/33')",
        "!isCIDR('192.168.0.0')",
        "cidr('192.168.0.0/24').containsIP(ip('192.168.0.1'))",
        "cidr('192.168.0.0/24').containsIP('192.168.0.1')",
        "!cidr('192.168.0.0/24').containsIP('192.168.1.1')",
        "!cidr('192.168.0.0/24').containsIP('::1')",
        "cidr('192.168.0.0/24').containsCIDR('192.168.0.0/25')",
        "!cidr('192.168.0.0/24').containsCIDR('192.168.0.0/23')",
        "cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.128/25'))",
        "cidr('192.168.0.1/24').ip() == ip('192.168.0.1')",
        "cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')",
        "cidr('192.168.0.1/24').prefixLength() == 24",
        "cidr('::1/128').ip().family() == 6",
        "string(cidr('192.168.0.1/24').masked()) == '192.168.0.0/24'",
    ]);
    all_fail(&[
        ("ip('1.2.3')", "parse error"),
        ("ip('::ffff:1.2.3.4')", "IPv4-mapped"),
        ("cidr('1.2.3.4')", "parse error"),
    ]);
}

#[test]
fn kubernetes_quantity_and_semver_libraries() {
    all_true(&[
        "quantity('80Gi').isGreaterThan(quantity('40Gi'))",
        "quantity('1').compareTo(quantity('1000m')) == 0",
        "quantity('1.5').sign() == 1",
        "!quantity('1.5').isInteger()",
        "quantity('2Ki').asInteger() == 2048",
        "quantity('1').add(2).isGreaterThan(quantity('2'))",
        "quantity('1Gi').sub(quantity('1Gi')).sign() == 0",
        "isQuantity('1Gi') && !isQuantity('x')",
        "semver('1.2.3').major() == 1 && semver('1.2.3').minor() == 2",
        "semver('1.2.3').isLessThan(semver('1.10.0'))",
        "semver('1.2.3') == semver('1.2.3')",
        "isSemver('1.2.3') && !isSemver('v1.2')",
        "isSemver('v1.2', true)",
        "semver('v01.2', true) == semver('1.2.0')",
    ]);
    all_fail(&[
        ("semver('v1.2')", "invalid semantic version"),
        (
            "quantity('1').compareTo(semver('1.0.0'))",
            "compares two quantities",
        ),
    ]);
}

#[test]
fn undeclared_references_do_not_compile() {
    let table: [(&str, Result<(), &str>); 10] = [
        ("x > 1 && [1].all(i, i > 0)", Ok(())),
        ("cel.bind(v, x, v > 1)", Ok(())),
        ("has(x.y) || size('a') == 1 || type(x) == int", Ok(())),
        ("string(x) + dyn('a') == '7a' && int('1') == 1", Ok(())),
        (
            "y > 1",
            Err(
                "ERROR: <input>:1:1: undeclared reference to 'y' (in container '')\n | y > 1\n | ^",
            ),
        ),
        (
            "x == 1 &&\n'a'.quantityLike()",
            // At the call's parenthesis, where cel-go places a call.
            Err(
                "ERROR: <input>:2:17: undeclared reference to 'quantityLike' (in container '')\n | 'a'.quantityLike()\n | ................^",
            ),
        ),
        ("frobnicate(x)", Err("undeclared reference to 'frobnicate'")),
        ("[1].all(i, j > 0)", Err("undeclared reference to 'j'")),
        ("nope.quote('a')", Err("undeclared reference to 'quote'")),
        ("x ==", Err("ERROR: <input>:1:")),
    ];
    for (expression, want) in table {
        let got = compile(expression, &["x"]).map(drop).map_err(|e| e.0);
        match (got, want) {
            (Ok(()), Ok(())) => {}
            (Err(message), Err(part)) => assert!(message.contains(part), "{expression}: {message}"),
            (got, want) => panic!("{expression}: got {got:?}, want {want:?}"),
        }
    }
}
