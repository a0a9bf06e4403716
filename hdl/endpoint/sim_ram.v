// scin_sim_ram: the behavioural storage of the simulated endpoint memories (SimRam in sim_ram.py).
//
// Simulation only. Block RAM semantics as Amaranth's lib.memory gives them: one write port with
// byte enables, three synchronous read ports with enables, reads not transparent to a write in the
// same cycle. Written by hand (not elaborated from Amaranth) so a memory of megabytes costs neither
// a megabyte-long `initial` block in the generated Verilog nor Python work per word: the testbench
// loads and dumps whole memories through files.
//
// File backdoor, by plusargs (NAME is the instance's name parameter, e.g. "ep0"):
//   +scin_load_NAME=PATH   $readmemh(PATH) at time 0, after zeroing (use @ADDR lines for regions)
//   +scin_dump_NAME=PATH   $writememh(PATH) of words [lo, hi) when the simulation ends
//   +scin_dump_lo=N +scin_dump_hi=N   the dump range (default: the whole memory)
module scin_sim_ram #(
  parameter WIDTH = 256,
  parameter DEPTH = 1024,
  parameter ABITS = 10,
  parameter NAME = "mem"
) (
  input                    clk,
  input      [ABITS-1:0]   w_addr,
  input      [WIDTH-1:0]   w_data,
  input      [WIDTH/8-1:0] w_en,
  input      [ABITS-1:0]   r0_addr,
  input                    r0_en,
  output reg [WIDTH-1:0]   r0_data,
  input      [ABITS-1:0]   r1_addr,
  input                    r1_en,
  output reg [WIDTH-1:0]   r1_data,
  input      [ABITS-1:0]   r2_addr,
  input                    r2_en,
  output reg [WIDTH-1:0]   r2_data
);
  reg [WIDTH-1:0] mem [0:DEPTH-1];
  string load_path, dump_path;
  integer i, lo, hi;

  initial begin
    r0_data = {WIDTH{1'b0}};
    r1_data = {WIDTH{1'b0}};
    r2_data = {WIDTH{1'b0}};
    for (i = 0; i < DEPTH; i = i + 1) mem[i] = {WIDTH{1'b0}};
    if ($value$plusargs({"scin_load_", NAME, "=%s"}, load_path))
      $readmemh(load_path, mem);
  end

  final begin
    if ($value$plusargs({"scin_dump_", NAME, "=%s"}, dump_path)) begin
      if (!$value$plusargs("scin_dump_lo=%d", lo)) lo = 0;
      if (!$value$plusargs("scin_dump_hi=%d", hi)) hi = DEPTH;
      $writememh(dump_path, mem, lo, hi - 1);
    end
  end

  integer b;
  always @(posedge clk) begin
    for (b = 0; b < WIDTH / 8; b = b + 1)
      if (w_en[b]) mem[w_addr][8 * b +: 8] <= w_data[8 * b +: 8];
    if (r0_en) r0_data <= mem[r0_addr];
    if (r1_en) r1_data <= mem[r1_addr];
    if (r2_en) r2_data <= mem[r2_addr];
  end
endmodule
