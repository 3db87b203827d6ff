import Crypto

/// How a cluster spreads its ledgers over its members: each ledger belongs to one of
/// ``groups`` placement groups, by its id, and each group has a primary of its own
/// (docs/PROTOCOL.md §7.19). A group is the unit of leadership, fencing and failover; the
/// members share the groups out evenly (``assignment(of:)``).
public enum Placement {
    /// The number of placement groups: every member of every cluster uses this many.
    public static let groups = 16

    /// The group of ledger `id`: the first four bytes of the SHA-256 of its UTF-8 bytes, as
    /// a big-endian number, modulo ``groups``.
    public static func group(of id: String) -> Int {
        let digest = SHA256.hash(data: Array(id.utf8))
        let prefix = digest.withUnsafeBytes { bytes in bytes.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) } }
        return Int(prefix % UInt32(groups))
    }

    /// The member each group belongs on, for a cluster of `members` (nil for every group
    /// without members): as even as the count allows (⌊groups ÷ members⌋ or one more each), and
    /// mostly stable as members come and go — each group goes to the member that ranks it highest
    /// (the first eight bytes of the SHA-256 of `"<group>/<member>"`, big-endian) among those
    /// with room left, groups taken in order. Every member computes the same from the same
    /// members.
    public static func assignment(of members: [String]) -> [String?] {
        let members = Array(Set(members)).sorted()
        guard !members.isEmpty else { return Array(repeating: nil, count: groups) }
        // Each member gets ⌊groups ÷ members⌋, and the first to reach it while some are left
        // over one more.
        let share = groups / members.count
        var (load, extra): ([String: Int], Int) = ([:], groups % members.count)
        return (0..<groups).map { group in
            let ranked = members.sorted { rank(group, $0) != rank(group, $1) ? rank(group, $0) > rank(group, $1) : $0 < $1 }
            let chosen = ranked.first { load[$0, default: 0] < share || (load[$0, default: 0] == share && extra > 0) }!
            if load[chosen, default: 0] == share { extra -= 1 }
            load[chosen, default: 0] += 1
            return chosen
        }
    }

    /// The members that keep each group's ledgers, for a cluster of `members` keeping `copies`
    /// of each (every member when there are no more than `copies`): the member
    /// ``assignment(of:)`` gives the group to first, then the others by how highly they rank the
    /// group (ties to the smaller name). Adding or removing a member moves few groups' copies.
    public static func keepers(of members: [String], copies: Int) -> [[String]] {
        let members = Array(Set(members)).sorted()
        return zip(0..<groups, assignment(of: members)).map { group, placed in
            guard let placed else { return [] }
            let others = members.filter { $0 != placed }.sorted {
                rank(group, $0) != rank(group, $1) ? rank(group, $0) > rank(group, $1) : $0 < $1
            }
            return [placed] + others.prefix(max(0, copies - 1))
        }
    }

    private static func rank(_ group: Int, _ member: String) -> UInt64 {
        SHA256.hash(data: Array("\(group)/\(member)".utf8)).withUnsafeBytes { bytes in bytes.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
    }
}
