use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn three() -> Admission {
    let mut a = Admission::new(ServerId(1));
    a.set_member(ServerId(1), vec![ip("127.0.0.11")]);
    a.set_member(ServerId(2), vec![ip("127.0.0.12")]);
    a.set_member(ServerId(3), vec![ip("127.0.0.13"), ip("::1")]);
    a
}

#[test]
fn a_member_is_taken_only_from_its_host_unless_authenticated() {
    let a = three();
    for port in [Port::Election, Port::Quorum] {
        assert_eq!(
            a.admit(port, ServerId(2), ip("127.0.0.12"), false),
            Verdict::Member
        );
        assert_eq!(
            a.admit(port, ServerId(3), ip("::1"), false),
            Verdict::Member
        );
        assert_eq!(
            a.admit(port, ServerId(2), ip("127.0.0.13"), false),
            Verdict::Refused(Refusal::WrongAddress {
                sid: ServerId(2),
                remote: ip("127.0.0.13")
            })
        );
        assert_eq!(
            a.admit(port, ServerId(2), ip("10.9.9.9"), true),
            Verdict::Member
        );
        assert_eq!(
            a.admit(port, ServerId(1), ip("127.0.0.11"), true),
            Verdict::Refused(Refusal::OwnSid)
        );
    }
}

#[test]
fn a_stranger_is_answered_on_the_election_port_only() {
    let a = three();
    assert_eq!(
        a.admit(Port::Election, ServerId(4), ip("127.0.0.14"), false),
        Verdict::Stranger
    );
    assert_eq!(
        a.admit(Port::Quorum, ServerId(4), ip("127.0.0.14"), true),
        Verdict::Refused(Refusal::NotAMember { sid: ServerId(4) })
    );
}

#[test]
fn a_flood_from_elsewhere_takes_no_member_slot() {
    let mut a = three();
    let mut held = Vec::new();
    // One address gets a few slots, and all others together a few more.
    for _ in 0..ADDRESS_HANDSHAKES {
        held.push(a.start_handshake(ip("192.0.2.1")).unwrap());
    }
    assert!(a.start_handshake(ip("192.0.2.1")).is_err());
    for i in 0..STRANGER_HANDSHAKES - ADDRESS_HANDSHAKES {
        held.push(
            a.start_handshake(ip(&format!("192.0.2.{}", 10 + i)))
                .unwrap(),
        );
    }
    assert_eq!(
        a.start_handshake(ip("192.0.2.200")).unwrap_err(),
        Refusal::HandshakesFull {
            remote: ip("192.0.2.200")
        }
    );
    // The members still have every slot of their own.
    let mut members = Vec::new();
    for _ in 0..MEMBER_HANDSHAKES {
        members.push(a.start_handshake(ip("127.0.0.12")).unwrap());
    }
    assert!(a.start_handshake(ip("127.0.0.12")).is_err());
    assert!(a.start_handshake(ip("127.0.0.13")).is_ok());
    // Slots given back are taken again.
    for slot in held.drain(..) {
        a.end_handshake(slot);
    }
    assert_eq!(a.handshakes_from(ip("192.0.2.1")), 0);
    assert!(a.start_handshake(ip("192.0.2.200")).is_ok());
    for slot in members {
        a.end_handshake(slot);
    }
    assert_eq!(a.handshakes_from(ip("127.0.0.12")), 0);
}

#[test]
fn a_slot_counts_where_it_was_taken_though_the_members_change() {
    let mut a = three();
    let slot = a.start_handshake(ip("127.0.0.14")).unwrap();
    a.set_member(ServerId(4), vec![ip("127.0.0.14")]);
    a.end_handshake(slot);
    for i in 0..STRANGER_HANDSHAKES {
        a.start_handshake(ip(&format!("192.0.2.{}", 10 + i)))
            .unwrap();
    }
}
