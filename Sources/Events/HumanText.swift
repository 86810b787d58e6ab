import FoundationEssentials
import Glibc
import MediaCore
import Basics

/// How the human lines show values (the rules the CLI's text output has always used).
public enum HumanText {
    /// A measurement: one decimal ("20.1").
    public static func decimal(_ value: Double) -> String { cFormat("%.1f", value) }
    /// A measurement that may be unknown: one decimal, or "-".
    public static func decimal(_ value: Double?) -> String { value.map(decimal) ?? "-" }
    /// A ratio as a percentage with one decimal ("1.2%"), or "-".
    public static func percent(_ ratio: Double?) -> String { ratio.map { cFormat("%.1f%%", $0 * 100) } ?? "-" }
}

extension JSONValue {
    /// A field's value as the human lines show it: text as is, integers and booleans as
    /// written, other numbers to one decimal, null (and lists and objects) as "-".
    public var humanText: String {
        switch self {
        case .string(let s): return s
        case .int(let i): return String(i)
        case .double(let d): return HumanText.decimal(d)
        case .bool(let b): return String(b)
        case .null, .object, .array: return "-"
        }
    }
}
